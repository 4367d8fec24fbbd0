# cmake --install works for a user's project: installs this build into PREFIX, builds examples/custom-policy against
# it with find_package(lcsim), and runs the example's golden test with that binary.
# With PYTHON set, the installed Python package too: imported from the prefix alone, it finds the installed `lcsim`.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DCXX_COMPILER=... [-DLINK_FLAGS=...] [-DPYTHON=...]
#         -P install_example.cmake
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${ARGV} exited with ${rc}:\n${out}\n${err}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
if(PYTHON)
  file(GLOB site ${WORK_DIR}/prefix/lib/python3*/dist-packages)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${site} --unset=LCSIM_BINARY ${PYTHON} -c
                          "import lcsim; print(lcsim.plan('scenarios/default.json', samples=1, iterations=1))"
                  WORKING_DIRECTORY ${SOURCE_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "Results\\(plan: deepspeed 1.00x")
    message(FATAL_ERROR "the installed Python package failed (${rc}):\n${out}\n${err}")
  endif()
endif()
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/custom-policy -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX_COMPILER} "-DCMAKE_EXE_LINKER_FLAGS=${LINK_FLAGS}")
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build -j2)
set(COMMAND ${WORK_DIR}/build/lcsim-custom plan examples/custom-policy/scenario.json --samples 1)
set(WORKING_DIRECTORY ${SOURCE_DIR})
set(EXPECTED ${SOURCE_DIR}/examples/custom-policy/expected-plan.txt)
include(${SOURCE_DIR}/tests/golden_output.cmake)
