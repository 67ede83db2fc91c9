# Debian packages with CPack's DEB generator: `scripts/package.sh` (or `cpack -G DEB` in the build
# tree after a build) writes them to <build>/packages/. docs/deploy.md says what each one holds.
#
#   component     package                 files
#   agent         ringside-agent          /usr/bin/ringside-agent, its units, udev rule, sysusers.d,
#                                         /etc/default/ringside-agent (conffile)
#   aggregator    ringside-aggregator     /usr/bin/ringside-aggregator, its unit,
#                                         /etc/default/ringside-aggregator (conffile)
#   cli           ringside-cli            /usr/bin/ringside
#   nccl_plugin   ringside-nccl-plugin    /usr/lib/ringside/libringside_nccl.so
#
# The binaries' install() rules sit next to their targets (daemon/, collectors/nccl_plugin/), with
# destinations relative to the prefix (/usr in the packages). The files Debian keeps outside /usr
# (units and udev rules under /lib on Debian 12, /etc/default) have absolute destinations here, so a
# plain `cmake --install` needs DESTDIR=... for them, as with any package that ships units.
# Maintainer scripts (user, udev, systemd) are in deploy/debian/<package>/.

set(RINGSIDE_DEPLOY_DIR ${CMAKE_CURRENT_LIST_DIR}/../deploy)
cmake_path(NORMAL_PATH RINGSIDE_DEPLOY_DIR)

# --- ringside-agent -----------------------------------------------------------------------------
install(FILES
  ${RINGSIDE_DEPLOY_DIR}/systemd/ringside-agent.service
  ${RINGSIDE_DEPLOY_DIR}/systemd/ringside-collectives.socket
  DESTINATION /lib/systemd/system COMPONENT agent)
install(FILES ${RINGSIDE_DEPLOY_DIR}/udev/60-ringside-umad.rules
  DESTINATION /lib/udev/rules.d COMPONENT agent)
install(FILES ${RINGSIDE_DEPLOY_DIR}/default/ringside-agent
  DESTINATION /etc/default COMPONENT agent)
# The static system user and group "ringside" (the udev rule's GROUP=, the socket's owner).
install(FILES ${RINGSIDE_DEPLOY_DIR}/debian/ringside-agent/sysusers.conf
  DESTINATION lib/sysusers.d RENAME ringside.conf COMPONENT agent)

# --- ringside-aggregator ------------------------------------------------------------------------
install(FILES ${RINGSIDE_DEPLOY_DIR}/systemd/ringside-aggregator.service
  DESTINATION /lib/systemd/system COMPONENT aggregator)
install(FILES ${RINGSIDE_DEPLOY_DIR}/default/ringside-aggregator
  DESTINATION /etc/default COMPONENT aggregator)

# Example drop-ins the units and /etc/default files point at
# (/usr/share/doc/ringside/examples/<unit>.d/...), and the privileges page their Documentation=
# names, where the tree has them.
foreach(example
    "agent;systemd/ringside-agent.service.d/optics.conf.example"
    "agent;systemd/ringside-agent.service.d/lldp.conf.example"
    "aggregator;systemd/ringside-aggregator.service.d/tls.conf.example")
  list(GET example 0 component)
  list(GET example 1 file)
  if(EXISTS ${RINGSIDE_DEPLOY_DIR}/${file})
    get_filename_component(dir ${file} DIRECTORY)
    get_filename_component(dir ${dir} NAME)
    install(FILES ${RINGSIDE_DEPLOY_DIR}/${file}
      DESTINATION share/doc/ringside/examples/${dir} COMPONENT ${component})
  endif()
endforeach()
# The web configuration template (docs/http-security.md), with each daemon's package.
foreach(component agent aggregator)
  install(FILES ${RINGSIDE_DEPLOY_DIR}/prometheus/web-config.yml.example
    DESTINATION share/doc/ringside-${component}/examples COMPONENT ${component})
endforeach()
if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/../docs/privileges.md)
  install(FILES ${CMAKE_CURRENT_LIST_DIR}/../docs/privileges.md
    DESTINATION share/doc/ringside COMPONENT agent)
endif()

# --- CPack --------------------------------------------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ringside)
set(CPACK_PACKAGE_VENDOR ringside)
set(CPACK_PACKAGE_CONTACT "ringside maintainers <ringside@example.invalid>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages)
# cpack (and `make install`) install what is already built: scripts/package.sh builds first.
# Without this, cpack would build the `preinstall` target, i.e. everything (tests and benchmarks
# included), also when only the four packaged targets are wanted (tests/deploy/packaging.cmake).
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
# Absolute destinations (/lib, /etc) are expected, see above.
set(CPACK_WARN_ON_ABSOLUTE_INSTALL_DESTINATION OFF)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL agent aggregator cli nccl_plugin)
set(CPACK_COMPONENTS_GROUPING IGNORE)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <package>_<version>-<release>_<arch>.deb
# The Debian revision; a rebuild of the same source for a fix in packaging only bumps it.
set(RINGSIDE_DEB_RELEASE 1 CACHE STRING "Debian revision of the ringside packages")
set(CPACK_DEBIAN_PACKAGE_RELEASE ${RINGSIDE_DEB_RELEASE})
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)
# Depends: from dpkg-shlibdeps on each package's ELF files (the Debian packages of the shared
# libraries they link), plus what the maintainer scripts need, set per package below.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Maintainer scripts 0755, conffiles 0644, as dpkg-deb expects.
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Stripped binaries in the packages, their debug information in <package>-dbgsym .ddeb files next
# to them (as Debian's own builds do; by build id under /usr/lib/debug/.build-id/, found by gdb).
# Not CPACK_STRIP_FILES: it strips before the DEB generator could keep the debug information.
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)

set(CPACK_DEBIAN_AGENT_PACKAGE_NAME ringside-agent)
set(CPACK_DEBIAN_AGGREGATOR_PACKAGE_NAME ringside-aggregator)
set(CPACK_DEBIAN_CLI_PACKAGE_NAME ringside-cli)
set(CPACK_DEBIAN_NCCL_PLUGIN_PACKAGE_NAME ringside-nccl-plugin)

set(CPACK_COMPONENT_AGENT_DESCRIPTION
  "ringside node agent: RDMA, netdev and NVLink counters under GPU training jobs
ringside-agent reads InfiniBand/RoCE port and driver counters, netdev statistics, ethtool PFC
counters, NVLink state (NVML) and link events on a GPU node, serves them on /metrics and streams
them to ringside-aggregator. Installs a hardened systemd service running as the system user
ringside, the socket the NCCL profiler plugin sends collective records to, and a udev rule giving
group ringside the InfiniBand MAD devices (/dev/infiniband/umad*).")
set(CPACK_COMPONENT_AGGREGATOR_DESCRIPTION
  "ringside aggregator: detection of link, pause-storm and straggler incidents
ringside-aggregator receives the agents' streams, detects flapping, degraded and down links, PFC
pause storms, congestion, straggler ranks and job slowdowns, keeps incidents in SQLite, sends
alerts to Alertmanager and webhooks, and serves /metrics and the Query API. Installs a hardened
systemd service with a dynamic user and its state in /var/lib/ringside-aggregator.")
set(CPACK_COMPONENT_CLI_DESCRIPTION
  "ringside on-call command-line client
ringside queries ringside-aggregator's Query API: open incidents with their cause chain and blast
radius, a live watch, unhealthy links, nodes and straggler ranks; it also imports and analyses
collective traces offline.")
set(CPACK_COMPONENT_NCCL_PLUGIN_DESCRIPTION
  "ringside NCCL profiler plugin
libringside_nccl.so is loaded by NCCL (2.27 or later) into training processes through
NCCL_PROFILER_PLUGIN=/usr/lib/ringside/libringside_nccl.so and sends one record per collective
per rank to the local ringside-agent. It links only the C library.")

# What the maintainer scripts call. systemd-sysusers (systemd, or the standalone build) creates
# the user; the same alternatives dh_installsysusers adds. deb-systemd-helper/-invoke come from
# init-system-helpers (Priority: required); udevadm is used only when udev runs.
set(CPACK_DEBIAN_AGENT_PACKAGE_DEPENDS "systemd | systemd-standalone-sysusers | systemd-sysusers")
set(CPACK_DEBIAN_AGENT_PACKAGE_SUGGESTS "ringside-nccl-plugin, ringside-cli")
set(CPACK_DEBIAN_AGGREGATOR_PACKAGE_SUGGESTS "ringside-cli")
set(CPACK_DEBIAN_AGENT_PACKAGE_SECTION net)
set(CPACK_DEBIAN_AGGREGATOR_PACKAGE_SECTION net)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION net)
set(CPACK_DEBIAN_NCCL_PLUGIN_PACKAGE_SECTION libs)

# Control files: maintainer scripts from deploy/debian/<package>/, and the conffiles list.
set(RINGSIDE_DEB_CONTROL_DIR ${CMAKE_BINARY_DIR}/debian-control)
foreach(pair "AGENT;ringside-agent" "AGGREGATOR;ringside-aggregator")
  list(GET pair 0 comp)
  list(GET pair 1 pkg)
  file(WRITE ${RINGSIDE_DEB_CONTROL_DIR}/${pkg}/conffiles "/etc/default/${pkg}\n")
  set(extra ${RINGSIDE_DEB_CONTROL_DIR}/${pkg}/conffiles)
  foreach(script postinst prerm postrm)
    list(APPEND extra ${RINGSIDE_DEPLOY_DIR}/debian/${pkg}/${script})
  endforeach()
  set(CPACK_DEBIAN_${comp}_PACKAGE_CONTROL_EXTRA "${extra}")
endforeach()

include(CPack)
