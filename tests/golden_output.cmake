# A golden-output test, as SimGrid's .tesh files are: runs COMMAND (a list) in WORKING_DIRECTORY, masks what varies
# from run to run (a policy row's trailing planning time in milliseconds), and compares stdout with EXPECTED.
#   cmake -DCOMMAND="prog;arg;..." -DWORKING_DIRECTORY=dir -DEXPECTED=file [-DUPDATE=ON] -P golden_output.cmake
# UPDATE=ON rewrites EXPECTED from the run instead of comparing.
execute_process(COMMAND ${COMMAND} WORKING_DIRECTORY ${WORKING_DIRECTORY} OUTPUT_VARIABLE out ERROR_VARIABLE err
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${COMMAND} exited with ${rc}:\n${err}")
endif()
string(REGEX REPLACE " +[0-9]+\\.[0-9]\n" " <ms>\n" out "${out}")
if(UPDATE)
  file(WRITE ${EXPECTED} "${out}")
  return()
endif()
file(READ ${EXPECTED} expected)
if(NOT out STREQUAL expected)
  message(FATAL_ERROR "output differs from ${EXPECTED}; this run printed:\n${out}")
endif()
