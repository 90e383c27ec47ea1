# install.cmake: what `cmake --install` puts under the prefix, included from
# the top-level CMakeLists.txt when TJ_INSTALL is on:
#   lib/     libtilejit.so.0.1.0 with its links libtilejit.so.0 (the soname)
#            and libtilejit.so; libtilejit.a
#   include/ tilejit.h
#   bin/     the tools (when TJ_TOOLS is on)
#   lib/cmake/tilejit/  the CMake package: find_package(tilejit) gives
#            tilejit::tilejit (shared) and tilejit::tilejit_static, with a
#            version file (0.x: the same minor version is compatible)
#   lib/pkgconfig/tilejit.pc  relocatable (paths relative to the file);
#            `pkg-config --static` adds the static library's -ldl -lpthread -lm
include(CMakePackageConfigHelpers)

set(TJ_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tilejit)
install(TARGETS tilejit tilejit_static EXPORT tilejitTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/tilejit.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TJ_TOOLS)
  install(TARGETS ${TJ_TOOL_TARGETS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

install(EXPORT tilejitTargets NAMESPACE tilejit:: DESTINATION ${TJ_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tilejitConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/tilejitConfig.cmake
                              INSTALL_DESTINATION ${TJ_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tilejitConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tilejitConfig.cmake
              ${PROJECT_BINARY_DIR}/tilejitConfigVersion.cmake DESTINATION ${TJ_CMAKE_DIR})

# tilejit.pc finds the prefix from its own place (${pcfiledir}), so that an
# install with `cmake --install --prefix DIR` anywhere stays right.
# lib/pkgconfig -> ../..; an absolute libdir or includedir stays as it is.
string(REGEX REPLACE "[^/]+" ".." TJ_PC_UP ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
set(TJ_PC_PREFIX "\${pcfiledir}/${TJ_PC_UP}")
foreach(dir LIBDIR INCLUDEDIR)
  set(TJ_PC_${dir} ${CMAKE_INSTALL_${dir}})
  if(NOT IS_ABSOLUTE ${CMAKE_INSTALL_${dir}})
    set(TJ_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
set(TJ_PC_LIBS_PRIVATE "${CMAKE_DL_LIBS}")
list(TRANSFORM TJ_PC_LIBS_PRIVATE PREPEND -l)
list(APPEND TJ_PC_LIBS_PRIVATE -lpthread -lm)
list(JOIN TJ_PC_LIBS_PRIVATE " " TJ_PC_LIBS_PRIVATE)
configure_file(${PROJECT_SOURCE_DIR}/cmake/tilejit.pc.in ${PROJECT_BINARY_DIR}/tilejit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tilejit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
