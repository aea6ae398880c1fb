# Smoke tests of the `int8attn` command-line tool: info, a tiny run with JSON output, the
# decode path through the cache API, and exit code 2 with usage for bad arguments.
# INT8ATTN_BUILD_TOOLS too: the target may be defined after tests/ (add_test resolves it later).
if(TARGET int8attn_cli OR INT8ATTN_BUILD_TOOLS)
  add_test(NAME cli_info COMMAND int8attn_cli info)
  add_test(NAME cli_run_tiny
           COMMAND int8attn_cli run --device cpu --b 1 --h 4 --hkv 2 --nq 70 --nk 130 --d 40
                   --causal --repeats 1 --warmup 0 --quiet
                   --json ${CMAKE_CURRENT_BINARY_DIR}/cli_run_tiny.json)
  add_test(NAME cli_run_decode
           COMMAND int8attn_cli run decode_b2_nk300 --device cpu --dtype fp16 --repeats 1
                   --warmup 0 --quiet)
  add_test(NAME cli_bad_arguments
           COMMAND sh -c "\"$0\" run --mode nonsense 2>&1; test $? -eq 2"
                   $<TARGET_FILE:int8attn_cli>)
  set_tests_properties(cli_info cli_run_tiny cli_run_decode cli_bad_arguments
                       PROPERTIES LABELS "cpu")
  set_tests_properties(cli_info PROPERTIES PASS_REGULAR_EXPRESSION "features: cpu")
  set_tests_properties(cli_run_tiny cli_run_decode PROPERTIES PASS_REGULAR_EXPRESSION "BALANCED")
  set_tests_properties(cli_bad_arguments PROPERTIES PASS_REGULAR_EXPRESSION "usage: int8attn")
endif()
