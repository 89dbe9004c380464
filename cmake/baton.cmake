# Shared compile settings and helpers for every baton target.

set(BATON_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wno-missing-field-initializers)
if(BATON_WERROR)
  list(APPEND BATON_WARNINGS -Werror)
endif()

if(BATON_FUZZ)
  # The fuzz targets (fuzz/) are built in the same tree as the tests: everything is instrumented
  # for libFuzzer's coverage, which needs clang, and checked by the sanitizers below.
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "BATON_FUZZ needs clang (libFuzzer): configure with CMAKE_CXX_COMPILER=clang++")
  endif()
  set(BATON_SANITIZE ON)
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
if(BATON_SANITIZE)
  # float-cast-overflow is named on its own: GCC's -fsanitize=undefined leaves it out, so a double
  # out of an int's range (an SWF field of 1e308) was cast silently.
  add_compile_options(-fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined,float-cast-overflow)
  add_link_options(-fsanitize=address,undefined,float-cast-overflow)
endif()
if(BATON_TSAN)
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()

# The dependency rule of ARCHITECTURE.md, enforced by the build: a module's targets have on
# their include path only a generated folder of links to the src/ folders of the modules it may
# depend on, so `#include "server/..."` from sim/ fails to compile. This table is the rule.
set(BATON_MODULE_DEPS_core core)
set(BATON_MODULE_DEPS_topology core topology)
set(BATON_MODULE_DEPS_perf core topology perf)
set(BATON_MODULE_DEPS_health core topology health)
set(BATON_MODULE_DEPS_federation core federation)
set(BATON_MODULE_DEPS_sched core topology health sched)
set(BATON_MODULE_DEPS_planning core topology perf sched planning)
set(BATON_MODULE_DEPS_sim core topology perf health sched planning federation sim)
set(BATON_MODULE_DEPS_server core topology perf health sched planning federation server)
set(BATON_MODULE_DEPS_cli core topology perf health sched planning federation sim server cli)
set(BATON_INCLUDE_VIEWS ${PROJECT_BINARY_DIR}/include-views)
file(REMOVE_RECURSE ${BATON_INCLUDE_VIEWS})  # rebuilt below, so a dropped dependency goes

# baton_module_view(MODULE OUT_DIR): the include folder for MODULE's targets.
function(baton_module_view module out_dir)
  if(NOT DEFINED BATON_MODULE_DEPS_${module})
    message(FATAL_ERROR "src/${module} is not in the dependency table of cmake/baton.cmake")
  endif()
  set(dir ${BATON_INCLUDE_VIEWS}/${module})
  foreach(dep IN LISTS BATON_MODULE_DEPS_${module})
    if(NOT EXISTS ${dir}/${dep})
      file(MAKE_DIRECTORY ${dir})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${dep} ${dir}/${dep} SYMBOLIC)
    endif()
  endforeach()
  set(${out_dir} ${dir} PARENT_SCOPE)
endfunction()

# baton_module_includes(TARGET): gives TARGET the view of the src/ module its CMakeLists is in.
function(baton_module_includes target)
  file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR}/src ${CMAKE_CURRENT_SOURCE_DIR})
  string(REGEX REPLACE "/.*" "" module "${rel}")
  baton_module_view(${module} view)
  target_include_directories(${target} PUBLIC ${view})
endfunction()

# baton_library(NAME SOURCES ... DEPS ...): one library per src/ folder.
function(baton_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  baton_module_includes(${name})
  target_compile_options(${name} PRIVATE ${BATON_WARNINGS})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# baton_test(NAME SOURCES ... DEPS ... [LABELS L]): a GoogleTest binary beside the code, its tests
# labelled L (default `unit`; `daemon` for those that start daemons).
function(baton_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  baton_module_includes(${name})
  # Debug builds (dev, tsan) compile the tests themselves without optimisation; the code under
  # test keeps the preset's -O1. A test file is fixtures and gtest macros, whose -O1 code
  # generation under the sanitizers was two thirds of its compile time: at -O0
  # scheduling_controller_test.cc takes 16 s instead of 27, server_test.cc 12 instead of 22.
  target_compile_options(${name} PRIVATE ${BATON_WARNINGS} $<$<CONFIG:Debug>:-O0>)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  # One label: gtest_discover_tests flattens PROPERTIES into key-value pairs, so a list of labels
  # ("crash;unit") would become the label "crash" and a bogus property "unit".
  list(LENGTH ARG_LABELS label_count)
  if(NOT label_count EQUAL 1)
    message(FATAL_ERROR "baton_test(${name}): give one label, not '${ARG_LABELS}'")
  endif()
  gtest_discover_tests(${name}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    DISCOVERY_MODE PRE_TEST
    PROPERTIES LABELS "${ARG_LABELS}" ENVIRONMENT "BATON_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endfunction()
