# check_exports.cmake: fails unless a shared library exports exactly the
# functions its public header marks TJ_API. Run as a script:
#
#   cmake -DNM=nm -DLIBRARY=libtilejit.so -DHEADER=include/tilejit.h -P check_exports.cmake
#
# The defined dynamic symbols (`nm -D --defined-only`) must all start with
# tj_ and be declared TJ_API in HEADER, every function so declared must be
# exported, and HEADER may declare no tj_ function without TJ_API. Each
# symbol that breaks a rule is named on its own line. With -DSTATIC=1,
# LIBRARY is a static archive and its global symbols (`nm -g
# --defined-only`) are held to the same rules: what a static link sees.
cmake_minimum_required(VERSION 3.25)
foreach(var NM LIBRARY HEADER)
  if(NOT ${var})
    message(FATAL_ERROR "check_exports: ${var} is not set")
  endif()
endforeach()

set(which -D)
if(STATIC)
  set(which -g)
endif()
execute_process(COMMAND ${NM} ${which} --defined-only ${LIBRARY}
                OUTPUT_VARIABLE listing ERROR_VARIABLE errors RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "check_exports: ${NM} ${which} ${LIBRARY} failed: ${errors}")
endif()
string(REGEX MATCHALL "[^\n]+" lines "${listing}")
set(exported)
foreach(line ${lines})
  # "0000000000012345 T name" or "name@@VERSION"
  if(line MATCHES "^[0-9a-fA-F]* *[A-Za-z] ([^ @]+)")
    list(APPEND exported ${CMAKE_MATCH_1})
  endif()
endforeach()

file(STRINGS ${HEADER} declarations REGEX "^TJ_API ")
set(declared)
foreach(line ${declarations})
  if(line MATCHES "(tj_[A-Za-z0-9_]+)\\(")
    list(APPEND declared ${CMAKE_MATCH_1})
  endif()
endforeach()

# A function the header declares without TJ_API would be hidden without a word.
set(problems)
file(STRINGS ${HEADER} prototypes REGEX "^[A-Za-z_][^(]*[ *]tj_[A-Za-z0-9_]+\\(")
foreach(line ${prototypes})
  if(NOT line MATCHES "^(TJ_API|static|typedef) " AND line MATCHES "(tj_[A-Za-z0-9_]+)\\(")
    list(APPEND problems "the header declares ${CMAKE_MATCH_1} without TJ_API")
  endif()
endforeach()
foreach(name ${exported})
  if(NOT name MATCHES "^tj_")
    list(APPEND problems "exports ${name}, a symbol outside the tj_ API")
  elseif(NOT name IN_LIST declared)
    list(APPEND problems "exports ${name}, which the header does not declare TJ_API")
  endif()
endforeach()
foreach(name ${declared})
  if(NOT name IN_LIST exported)
    list(APPEND problems "does not export ${name}, declared TJ_API in the header")
  endif()
endforeach()

list(LENGTH exported count)
if(problems)
  list(JOIN problems "\n  " text)
  message(FATAL_ERROR "${LIBRARY} (${count} symbols):\n  ${text}")
endif()
if(count EQUAL 0)
  message(FATAL_ERROR "${LIBRARY} exports nothing")
endif()
message(STATUS "${LIBRARY} exports the ${count} functions of the header, nothing else")
