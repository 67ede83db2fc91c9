# deploy/systemd, deploy/default, deploy/udev (issue #13): offline checks with systemd-analyze
# (Debian package systemd) of the units as shipped, their example drop-ins and exposure scores;
# the /etc/default files; the udev rule; the built agent and aggregator running on loopback under
# the units' seccomp settings (sandbox: libseccomp through python3). Skipped (ctest: SKIP) without
# systemd-analyze (or python3, libseccomp for sandbox).
# verify needs each ExecStart= program to exist: the script runs temporary copies of the units
# whose ExecStart= points at the binaries built here, every other line unchanged.
set(_ringside_units_test ${CMAKE_CURRENT_SOURCE_DIR}/deploy/systemd_units_test.sh)
set(_ringside_units_bins $<TARGET_FILE:ringside-agent> $<TARGET_FILE:ringside-aggregator>)
foreach(check verify security-agent security-aggregator agent-needs default-files udev sandbox)
  string(REPLACE "-" "_" _name "${check}")
  if(check STREQUAL "udev")
    set(_name "systemd_udev_umad_rule")
  else()
    set(_name "systemd_${_name}")
  endif()
  add_test(NAME ${_name}
    COMMAND ${_ringside_units_test} ${check} ${CMAKE_SOURCE_DIR} ${_ringside_units_bins})
  set_tests_properties(${_name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60 LABELS deploy)
endforeach()
