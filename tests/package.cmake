# The packaging tests, included from tests/CMakeLists.txt. They need no
# GPU, no driver and no Check:
#   test_exports               libtilejit.so exports exactly the TJ_API
#                              functions of include/tilejit.h (nm -D);
#   test_exports_static        libtilejit.a's global symbols are the same
#                              functions (nm -g): a static link sees nothing else;
#   test_exports_catches_leak  the same check on a fixture library that leaks
#                              buf_init must fail, naming it;
#   test_exports_static_catches_leak  and on tilejit_internal, the archive of
#                              the objects as they are (the tests' and tools');
#   test_consumer              installs the build into a temporary prefix and
#                              builds tests/consumer/ against it through
#                              find_package (shared and static), pkg-config
#                              and add_subdirectory (tests/consumer/run.sh).
set(TJ_CHECK_EXPORTS ${CMAKE_CURRENT_SOURCE_DIR}/exports/check_exports.cmake)
add_test(NAME test_exports
         COMMAND ${CMAKE_COMMAND} -DNM=${CMAKE_NM} -DLIBRARY=$<TARGET_FILE:tilejit>
                 -DHEADER=${PROJECT_SOURCE_DIR}/include/tilejit.h -P ${TJ_CHECK_EXPORTS})
set_tests_properties(test_exports PROPERTIES TIMEOUT 60 LABELS cpu)

if(TJ_STATIC_LOCALIZED) # else the static library holds the objects as they are
  add_test(NAME test_exports_static
           COMMAND ${CMAKE_COMMAND} -DNM=${CMAKE_NM} -DLIBRARY=$<TARGET_FILE:tilejit_static>
                   -DSTATIC=1 -DHEADER=${PROJECT_SOURCE_DIR}/include/tilejit.h -P ${TJ_CHECK_EXPORTS})
  set_tests_properties(test_exports_static PROPERTIES TIMEOUT 60 LABELS cpu)
endif()
add_test(NAME test_exports_static_catches_leak
         COMMAND ${CMAKE_COMMAND} -DNM=${CMAKE_NM} -DLIBRARY=$<TARGET_FILE:tilejit_internal>
                 -DSTATIC=1 -DHEADER=${PROJECT_SOURCE_DIR}/include/tilejit.h -P ${TJ_CHECK_EXPORTS})
set_tests_properties(test_exports_static_catches_leak PROPERTIES TIMEOUT 60 LABELS cpu
                     PASS_REGULAR_EXPRESSION "exports buf_init, a symbol outside the tj_ API")

add_library(tj_leaky_fixture SHARED exports/leaky.c)
set_target_properties(tj_leaky_fixture PROPERTIES C_VISIBILITY_PRESET default)
target_compile_options(tj_leaky_fixture PRIVATE ${TJ_WARNINGS})
add_test(NAME test_exports_catches_leak
         COMMAND ${CMAKE_COMMAND} -DNM=${CMAKE_NM} -DLIBRARY=$<TARGET_FILE:tj_leaky_fixture>
                 -DHEADER=${CMAKE_CURRENT_SOURCE_DIR}/exports/leaky.c -P ${TJ_CHECK_EXPORTS})
set_tests_properties(test_exports_catches_leak PROPERTIES TIMEOUT 60 LABELS cpu
                     PASS_REGULAR_EXPRESSION "exports buf_init, a symbol outside the tj_ API")

if(TJ_INSTALL)
  find_program(TJ_BASH bash)
  add_test(NAME test_consumer
           COMMAND ${TJ_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/consumer/run.sh ${CMAKE_COMMAND}
                   ${CMAKE_C_COMPILER} ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR}
                   ${PROJECT_VERSION} "${TJ_SANITIZER_FLAGS}")
  set_tests_properties(test_consumer PROPERTIES TIMEOUT 300 LABELS cpu)
endif()
