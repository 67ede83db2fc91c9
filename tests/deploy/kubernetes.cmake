# deploy/kubernetes (issues #13, #14): `kubectl kustomize` renders the base, every overlay,
# examples/all-components and examples/shards; every object validates against the Kubernetes, prometheus-operator and
# cert-manager schemas (npm kubernetes-models and friends, pinned in
# tests/deploy/kubernetes/package-lock.json and installed with `npm ci` into the build tree), with
# no unknown field; the security policy holds; the aggregator runs as two replica sets kept apart
# by anti-affinity, each replica's --peers names the other replica of its shard only, the agents
# list both or (examples/shards) route by a --shard_map matching the StatefulSets with a mounted
# --topology, every aggregator pod has the agents' map and --shard = its pod index (started for a
# moment from the built program, as is the agent), and Prometheus tells them apart by a `replica` target label that every rule on the
# aggregator's series aggregates away; the PrometheusRule matches
# deploy/prometheus/rules/ringside.rules.yml; the built ringside-agent and ringside-aggregator
# accept the rendered flag files (checked by name only when they are not built yet); and
# deliberately broken objects are rejected.
# Skipped (exit 77) without kubectl or node. Needs the npm registry on the first run and after
# the lock file changes. Set RINGSIDE_KUBECTL_COMPAT=/path/to/kubectl-1.20 to also render the base
# with an old kustomize (v2) and compare.
add_test(NAME kubernetes_manifests_test
  COMMAND sh ${CMAKE_SOURCE_DIR}/tests/deploy/kubernetes/run.sh
    ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/tests/deploy/kubernetes-npm
    --agent-bin=$<TARGET_FILE:ringside-agent>
    --aggregator-bin=$<TARGET_FILE:ringside-aggregator>)
set_tests_properties(kubernetes_manifests_test PROPERTIES
  SKIP_RETURN_CODE 77
  TIMEOUT 300
  LABELS deploy)
