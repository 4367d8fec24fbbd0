# cmake --install works for a user's project: installs this build into PREFIX, builds examples/custom-policy against
# it with find_package(lcsim), and runs the example's golden test with that binary.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DCXX_COMPILER=... [-DLINK_FLAGS=...] -P install_example.cmake
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${ARGV} exited with ${rc}:\n${out}\n${err}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/custom-policy -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX_COMPILER} "-DCMAKE_EXE_LINKER_FLAGS=${LINK_FLAGS}")
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build -j2)
set(COMMAND ${WORK_DIR}/build/lcsim-custom plan examples/custom-policy/scenario.json --samples 1)
set(WORKING_DIRECTORY ${SOURCE_DIR})
set(EXPECTED ${SOURCE_DIR}/examples/custom-policy/expected-plan.txt)
include(${SOURCE_DIR}/tests/golden_output.cmake)
