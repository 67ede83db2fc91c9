# Debian packages and the container image (issue #13; docs/deploy.md).
#  deploy_package_contents  cpack into <build>/deploy-test/packages; checks files, modes,
#                           conffiles, scripts, Depends (no root). Fixture for the two below.
#  deploy_package_install   a fresh Debian 12 root (mmdebstrap) with the packages; upgrade,
#                           reinstall, remove, purge, install again (root; skips otherwise).
#  deploy_image_rootfs      deploy/image/build.sh --rootfs-only; the agent, aggregator and CLI run
#                           from it as uid 9471 with chroot (root; skips otherwise).
# The two root tests download from the Debian mirror apt uses here, into a shared cache
# <build>/deploy-test/apt-cache.
set(RINGSIDE_DEPLOY_TEST_DIR ${CMAKE_BINARY_DIR}/deploy-test)
add_test(NAME deploy_package_contents
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/package_contents_test.sh ${CMAKE_BINARY_DIR}
    ${RINGSIDE_DEPLOY_TEST_DIR}/packages)
set_tests_properties(deploy_package_contents PROPERTIES
  FIXTURES_SETUP ringside_debs TIMEOUT 300 LABELS deploy)
add_test(NAME deploy_package_install
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/package_install_test.sh
    ${RINGSIDE_DEPLOY_TEST_DIR}/packages ${RINGSIDE_DEPLOY_TEST_DIR}
    ${RINGSIDE_SHARED_DIR}/fixtures/sysfs/node_exporter/sys)
add_test(NAME deploy_image_rootfs
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/image_rootfs_test.sh
    ${RINGSIDE_DEPLOY_TEST_DIR}/packages ${RINGSIDE_DEPLOY_TEST_DIR}
    ${RINGSIDE_SHARED_DIR}/fixtures/sysfs/node_exporter/sys)
set_tests_properties(deploy_package_install deploy_image_rootfs PROPERTIES
  FIXTURES_REQUIRED ringside_debs SKIP_RETURN_CODE 77 TIMEOUT 420 LABELS deploy)
