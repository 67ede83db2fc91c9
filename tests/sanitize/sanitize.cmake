# Sanitizer builds (-DRINGSIDE_SANITIZE=address|thread, cmake/Sanitize.cmake; scripts/test-sanitized.sh):
# the sanitizers' options for every test (ctest ENVIRONMENT, inherited by the daemons and helpers
# the tests start), and the labels that pick what runs:
#   tsan     the concurrent suites, run under TSan (scripts/test-sanitized.sh thread runs -L tsan).
#   no_sanitize  cannot run instrumented, each with its reason below (test-sanitized.sh runs
#            -LE no_sanitize, with either sanitizer).
# GoogleTest cases are discovered at build time, so their properties are set by a file that ctest
# reads after the discovered lists (TEST_INCLUDE_FILES): it loops over <target>_TESTS.
# Included at the end of tests/CMakeLists.txt. docs/reliability.md ("Sanitizers").
if(NOT RINGSIDE_SANITIZE)
  return()
endif()

set(_san_dir ${CMAKE_CURRENT_LIST_DIR})
if(RINGSIDE_SANITIZE STREQUAL "address")
  # verify_asan_link_order=0: ibsim's libumad2sim.so is LD_PRELOADed into ringside-fabric-scan
  # (ibsim_*_test) ahead of libasan; ASan works there but refuses to start without this.
  set(_san_env
    "ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:verify_asan_link_order=0:strict_string_checks=1:suppressions=${_san_dir}/asan.supp"
    "LSAN_OPTIONS=suppressions=${_san_dir}/lsan.supp:print_suppressions=0"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
elseif(RINGSIDE_SANITIZE STREQUAL "thread")
  # Abseil's Mutex/CondVar/Notification are annotated for TSan by a preloaded shim
  # (absl_sync_tsan.cc says why); TSan itself reports with exit code 66 and stops at the first.
  add_library(ringside_absl_tsan SHARED ${_san_dir}/absl_sync_tsan.cc)
  # Not instrumented itself (a child without TSan may inherit the LD_PRELOAD).
  set_property(TARGET ringside_absl_tsan PROPERTY COMPILE_OPTIONS -fno-omit-frame-pointer)
  set_property(TARGET ringside_absl_tsan PROPERTY LINK_OPTIONS "")
  target_link_libraries(ringside_absl_tsan PRIVATE ${CMAKE_DL_LIBS})
  set(_san_env
    "TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=${_san_dir}/tsan.supp"
    "LD_PRELOAD=$<TARGET_FILE:ringside_absl_tsan>")
endif()

# The concurrent suites (issue #18 item 2): uploader; collective listener (also inherited from
# systemd, with the progress watch); ingest service; analysis host; alert dispatcher; plugin ring
# and sender (the real plugin in driver processes); shard watch and incident watch (query service,
# remote incidents); the gRPC server's completion-queue threads; the series identity pool shared
# by admission threads (identity hints).
set(_san_tsan_targets uploader_test collective_listener_test systemd_notify_test
  aggregator_ingest_test analysis_host_test alerts_test nccl_plugin_test collective_record_test
  aggregator_query_test aggregator_grpc_server_test remote_incidents_test shard_watch_test
  series_state_test)
if(RINGSIDE_SANITIZE STREQUAL "thread")
  set(_san_tsan_built)
  foreach(_t IN LISTS _san_tsan_targets)
    if(TARGET ${_t})  # shard_watch_test is newer than some branches
      list(APPEND _san_tsan_built ${_t})
    endif()
  endforeach()
  add_custom_target(ringside_tsan_tests DEPENDS ${_san_tsan_built} ringside_absl_tsan)
endif()

# GoogleTest cases that cannot run instrumented (either sanitizer):
set(_san_no_sanitize_cases
  # Checks that the shipped plugin NEEDs only libc and the C++ runtime; instrumented, it also
  # NEEDs the sanitizer runtimes.
  NcclPluginLibraryTest.LinksOnlyTheCAndCxxRuntimes
  # Runs the plugin's hot path under a seccomp filter that turns every system call of that thread
  # into SIGSYS and skips it, to prove the plugin makes none; the sanitizer runtimes make their own
  # there (strace: the allocator's mmap, a pipe2 and write of the runtime), which then fail, and
  # the driver stops before "phase 1 done".
  NcclPluginTest.WithNoAgentAMillionCollectivesNeverBlockAndTheDropCountIsExact)
if(RINGSIDE_SANITIZE STREQUAL "thread")
  list(APPEND _san_no_sanitize_cases
    # Forks the multi-threaded driver and the child starts threads (the plugin's sender): TSan
    # refuses ("starting new threads after multi-threaded fork is not supported"). Runs under ASan.
    NcclPluginTest.SurvivesFork)
endif()

# Tests registered with add_test (not GoogleTest): environment, and no_sanitize with the reasons.
get_property(_san_plain_tests DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} PROPERTY TESTS)
foreach(_t IN LISTS _san_plain_tests)
  set(_env ${_san_env})
  if(_t STREQUAL "systemd_sandbox")
    # The daemons run under their units' seccomp filter, which denies ptrace (@debug), and
    # LeakSanitizer stops the world with ptrace: at exit it dies with "LeakSanitizer has
    # encountered a fatal error". Leaks of the same daemons are checked by every other process
    # test; here ASan and UBSan still run, only the leak check is off.
    list(TRANSFORM _env REPLACE "detect_leaks=1" "detect_leaks=0")
  endif()
  set_property(TEST ${_t} APPEND PROPERTY ENVIRONMENT ${_env})
endforeach()
# deploy_package_contents checks the packages' Depends (the plugin's is libc6 only), which an
# instrumented build changes (libasan8, libubsan1); deploy_package_install and deploy_image_rootfs
# install those packages in a fresh Debian root made by mmdebstrap from the mirror (network,
# minutes, and the instrumented binaries' runtime libraries are not in the packages' Depends).
set_property(TEST deploy_package_contents deploy_package_install deploy_image_rootfs APPEND
  PROPERTY LABELS no_sanitize)

function(_ringside_san_include dir)
  get_property(_targets GLOBAL PROPERTY RINGSIDE_GTEST_TARGETS_${dir})
  set(_body "# Generated by tests/sanitize/sanitize.cmake\n")
  foreach(_target IN LISTS _targets)
    set(_labels "${RINGSIDE_SANITIZE}")
    if(_target IN_LIST _san_tsan_targets)
      list(APPEND _labels tsan)
    endif()
    string(APPEND _body "foreach(_t IN LISTS ${_target}_TESTS)\n"
      "  set_tests_properties(\"\${_t}\" PROPERTIES ENVIRONMENT [==[${_san_env}]==] LABELS \"${_labels}\")\n"
      "endforeach()\n")
    foreach(_case IN LISTS _san_no_sanitize_cases)
      string(APPEND _body "list(FIND ${_target}_TESTS \"${_case}\" _i)\n"
        "if(NOT _i EQUAL -1)\n"
        "  set_tests_properties(\"${_case}\" PROPERTIES LABELS \"${_labels};no_sanitize\")\n"
        "endif()\n")
    endforeach()
  endforeach()
  string(MD5 _id "${dir}")
  set(_file ${CMAKE_CURRENT_BINARY_DIR}/ringside_sanitize_${_id}.cmake)
  file(GENERATE OUTPUT ${_file} CONTENT "${_body}")
  set_property(DIRECTORY ${dir} APPEND PROPERTY TEST_INCLUDE_FILES ${_file})
endfunction()
get_property(_san_dirs GLOBAL PROPERTY RINGSIDE_GTEST_DIRS)
list(REMOVE_DUPLICATES _san_dirs)
foreach(_d IN LISTS _san_dirs)
  _ringside_san_include(${_d})
endforeach()
