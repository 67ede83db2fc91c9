// Offline checks of deploy/kubernetes (docs/deploy-kubernetes.md, "What is checked offline").
//
//   node validate.mjs --root=REPO [--kubectl=kubectl] [--compat-kubectl=PATH]
//
// 1. `kubectl kustomize` renders the base, every overlay, examples/all-components and
//    examples/shards.
// 2. Every rendered object (and examples/training-job.yaml) validates against the Kubernetes,
//    prometheus-operator and cert-manager schemas of the npm packages kubernetes-models,
//    @kubernetes-models/prometheus-operator and @kubernetes-models/cert-manager, and has no field
//    those schemas do not know (the packages' validators accept unknown keys, so each key is
//    probed: given a value of the wrong type, a field the schema knows fails validation at its
//    own path; an unknown one does not).
// 3. Policy: what the manifests may grant (no privileged, hostPID/hostIPC, capabilities beyond
//    NET_ADMIN in the optics component, writable hostPaths beyond /run/ringside and the plugin
//    folder, CPU limits...), and what they must have (probes, tolerations, memory request =
//    limit, ...).
//    Replicas: two aggregator StatefulSets ringside-aggregator-a and -b that differ only in a <-> b,
//    with the same shard count, required anti-affinity on the node against each other's pods,
//    --peers naming the other replica of the same shard and nothing else (per pod, $(VAR)
//    expanded), their own headless Services; one PodDisruptionBudget over both sets; the CLI
//    Service and the NetworkPolicy covering both; the ServiceMonitor giving each pod a `replica`
//    target label from its name, job="ringside-aggregator", and labels that differ within a pair
//    by `replica` alone; the aggregator certificate naming every pod.
//    Routing: the agent has exactly one of --aggregator (both replicas of shard 0, one shard only)
//    and --shard_map (statefulset:COUNT:TEMPLATES with COUNT = the sets' replicas and the
//    templates = pod {shard} of each set through its headless Service, port 9472; --topology in a
//    mounted ConfigMap, not empty, the aggregators' file if they have one); an aggregator with
//    --shard_map has the agents' exactly and --shard = its pod index (per pod, $(SHARD) expanded
//    from the pod-index label); examples/shards' agent.flags is the base's beyond routing.
// 4. components/prometheus-operator/prometheusrule.yaml is what gen-prometheusrule.sh makes of
//    deploy/prometheus/rules/ringside.rules.yml, and has the same groups; no rule sets a label
//    named replica, and every rule on the aggregator's series aggregates `replica` away.
// 5. Self-test: deliberately broken objects must be rejected by checks 2 and 3.
// 6. With --agent-bin/--aggregator-bin (the built programs), each rendered flag file is read by
//    the program itself: an unknown or misspelled flag there would crash-loop the pods. Where the
//    agents route by --shard_map, every aggregator pod starts (on 127.0.0.1, for a moment) with
//    its flag file, arguments and topology and must say it is shard k of N, and the agent, named
//    after the topology's first node, must say which shard that node's leaf places it in.
// With --compat-kubectl (a kubectl whose kustomize is v2, e.g. Debian 12's 1.20), the base must
// render to the same objects with it.
//
// Exit status 0 when everything passes, 1 with every failure listed otherwise.
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { isDeepStrictEqual } from "node:util";
import YAML from "yaml";

const args = Object.fromEntries(
  process.argv.slice(2).map((a) => {
    const m = a.match(/^--([^=]+)=(.*)$/);
    if (!m) throw new Error(`bad argument ${a} (expected --name=value)`);
    return [m[1], m[2]];
  }),
);
const ROOT = args.root ?? join(dirname(fileURLToPath(import.meta.url)), "../../..");
const KUBECTL = args.kubectl ?? "kubectl";
const K8S = join(ROOT, "deploy/kubernetes");

// Values the manifests must agree on (docs/deploy-kubernetes.md).
const RINGSIDE_ID = 9471; // the image's ringside uid and gid
const NCCL_SOCKET_GID = 9472; // the plugin socket's group: training pods join it, and only it
const NAMESPACE = "ringside";
const WRITABLE_HOSTPATHS = {
  "/run/ringside": { containers: ["agent"], init: ["prepare-run-dir"] },
  "/opt/ringside/lib": { containers: [], init: ["copy-nccl-plugin", "install-nccl-plugin"] },
};
const ALLOWED_HOSTPATHS = ["/sys", "/run/ringside", "/opt/ringside/lib"];
const ALLOWED_CAPS = ["NET_ADMIN"];
const CAPS_ALLOWED_IN = ["overlays/optics"];
// The aggregator's replica sets: StatefulSets ringside-aggregator-<r>, pod k of each = shard k.
const AGGREGATOR_SETS = ["a", "b"];
const AGGREGATOR_GRPC = 9472;
// The statefulset: shard map's templates (docs/scale.md): pod {shard} of each set.
const SHARD_TEMPLATES = AGGREGATOR_SETS.map((r) => `ringside-aggregator-${r}-{shard}.ringside-aggregator-${r}.${NAMESPACE}.svc:${AGGREGATOR_GRPC}`).join(",");

let failures = [];
const fail = (where, msg) => failures.push(`${where}: ${msg}`);

// ---------------------------------------------------------------------------------------------
// Rendering

function render(kubectl, dir) {
  try {
    return execFileSync(kubectl, ["kustomize", dir], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 60_000,
    });
  } catch (e) {
    throw new Error(`${kubectl} kustomize ${dir} failed: ${e.stderr || e.message}`);
  }
}

function parseAll(text, where) {
  const docs = YAML.parseAllDocuments(text);
  const out = [];
  for (const d of docs) {
    if (d.errors.length) throw new Error(`${where}: YAML error: ${d.errors[0].message}`);
    const o = d.toJS();
    if (o !== null && o !== undefined) out.push(o);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Schema validation and the unknown-field probe

const modelCache = new Map();
async function modelFor(apiVersion, kind) {
  const key = `${apiVersion}/${kind}`;
  if (modelCache.has(key)) return modelCache.get(key);
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  let spec;
  if (group === "monitoring.coreos.com") {
    spec = `@kubernetes-models/prometheus-operator/${apiVersion}/${kind}`;
  } else if (group.endsWith("cert-manager.io")) {
    spec = `@kubernetes-models/cert-manager/${apiVersion}/${kind}`;
  } else {
    spec = `kubernetes-models/${group ? `${group}/` : ""}${version}/${kind}`;
  }
  let model = null;
  try {
    const mod = await import(spec);
    model = mod[kind] ?? null;
  } catch {
    model = null;
  }
  modelCache.set(key, model);
  return model;
}

// Errors of the model's validator for `data` (an empty list when valid).
function schemaErrors(Model, data) {
  try {
    new Model(data).validate();
    return [];
  } catch (e) {
    if (Array.isArray(e.errors)) return e.errors;
    return [{ instancePath: "", message: e.message }];
  }
}

const pointer = (parts) => parts.map((p) => "/" + String(p).replace(/~/g, "~0").replace(/\//g, "~1")).join("");
const probeValue = (v) => (typeof v === "boolean" ? "probe" : true);

// Every key path under `root` that the schema does not know. Mutates and restores `root`.
function unknownFields(Model, root) {
  const unknown = [];
  const walk = (node, path) => {
    if (Array.isArray(node)) {
      node.forEach((v, i) => walk(v, [...path, i]));
      return;
    }
    if (node === null || typeof node !== "object") return;
    for (const key of Object.keys(node)) {
      const at = [...path, key];
      if (path.length === 0 && (key === "apiVersion" || key === "kind")) continue;
      const saved = node[key];
      node[key] = probeValue(saved);
      const errs = schemaErrors(Model, root);
      node[key] = saved;
      const p = pointer(at);
      if (!errs.some((e) => e.instancePath === p || e.instancePath.startsWith(p + "/"))) {
        unknown.push(p);
        continue; // nothing below an unknown key can be known
      }
      walk(saved, at);
    }
  };
  walk(root, []);
  return unknown;
}

async function checkSchema(obj, where) {
  const id = `${where} ${obj.kind}/${obj.metadata?.name}`;
  const Model = await modelFor(obj.apiVersion, obj.kind);
  if (!Model) {
    fail(id, `no schema for apiVersion ${obj.apiVersion} kind ${obj.kind} (typo, or a kind the test does not know)`);
    return;
  }
  const errs = schemaErrors(Model, obj);
  for (const e of errs) fail(id, `schema: ${e.instancePath || "/"} ${e.message}`);
  if (errs.length) return;
  for (const p of unknownFields(Model, obj)) fail(id, `unknown field ${p} (not in the ${obj.apiVersion} ${obj.kind} schema)`);
}

// ---------------------------------------------------------------------------------------------
// Policy

const podSpecOf = (o) =>
  o.kind === "Pod" ? o.spec : ["DaemonSet", "StatefulSet", "Deployment", "Job", "ReplicaSet"].includes(o.kind) ? o.spec?.template?.spec : null;

// What a ringside workload may grant. `where` names the rendered target.
function checkWorkloadPolicy(o, where) {
  const spec = podSpecOf(o);
  if (!spec) return;
  const id = `${where} ${o.kind}/${o.metadata?.name}`;
  if (spec.hostPID) fail(id, "hostPID is set");
  if (spec.hostIPC) fail(id, "hostIPC is set");
  const psc = spec.securityContext ?? {};
  if (psc.runAsNonRoot !== true) fail(id, "pod securityContext.runAsNonRoot is not true");
  if (psc.runAsUser !== RINGSIDE_ID || psc.runAsGroup !== RINGSIDE_ID)
    fail(id, `pod runAsUser/runAsGroup ${psc.runAsUser}/${psc.runAsGroup}, expected the image's ${RINGSIDE_ID}`);
  const hostPathOf = Object.fromEntries((spec.volumes ?? []).filter((v) => v.hostPath).map((v) => [v.name, v.hostPath.path]));
  for (const p of Object.values(hostPathOf))
    if (!ALLOWED_HOSTPATHS.includes(p)) fail(id, `hostPath ${p} is not one of ${ALLOWED_HOSTPATHS.join(", ")}`);
  const all = [
    ...(spec.initContainers ?? []).map((c) => [c, true]),
    ...(spec.containers ?? []).map((c) => [c, false]),
  ];
  for (const [c, init] of all) {
    const cid = `${id} ${init ? "initContainer" : "container"} ${c.name}`;
    const sc = c.securityContext ?? {};
    if (sc.privileged === true) fail(cid, "privileged: true");
    if (sc.allowPrivilegeEscalation !== false) fail(cid, "allowPrivilegeEscalation is not false");
    if (sc.readOnlyRootFilesystem !== true) fail(cid, "readOnlyRootFilesystem is not true");
    const seccomp = sc.seccompProfile?.type ?? psc.seccompProfile?.type;
    if (seccomp !== "RuntimeDefault") fail(cid, `seccompProfile ${seccomp}, expected RuntimeDefault`);
    const drop = sc.capabilities?.drop ?? [];
    if (!drop.includes("ALL")) fail(cid, "capabilities.drop lacks ALL");
    const add = sc.capabilities?.add ?? [];
    for (const cap of add) if (!ALLOWED_CAPS.includes(cap)) fail(cid, `adds capability ${cap} (only ${ALLOWED_CAPS} may be added)`);
    if (add.length && (init || !CAPS_ALLOWED_IN.includes(where)))
      fail(cid, `adds ${add.join(",")}: capabilities are added only to the agent, in ${CAPS_ALLOWED_IN.join(", ")}`);
    const uid = sc.runAsUser ?? psc.runAsUser;
    if (uid === 0) {
      const rootOk = init ? add.length === 0 : add.length > 0 && CAPS_ALLOWED_IN.includes(where);
      if (!rootOk) fail(cid, "runs as uid 0 (allowed only for the agent's init containers, with no capabilities, and the agent in the optics overlay)");
    } else if (uid !== RINGSIDE_ID) fail(cid, `runAsUser ${uid}, expected ${RINGSIDE_ID}`);
    if (c.resources?.limits?.cpu !== undefined) fail(cid, `has limits.cpu ${c.resources.limits.cpu} (CPU requests only: limits throttle sampling)`);
    for (const m of c.volumeMounts ?? []) {
      const hp = hostPathOf[m.name];
      if (!hp || m.readOnly === true) continue;
      const w = WRITABLE_HOSTPATHS[hp];
      if (!w || !(init ? w.init : w.containers).includes(c.name))
        fail(cid, `mounts hostPath ${hp} read-write (allowed: ${Object.entries(WRITABLE_HOSTPATHS).map(([p, x]) => `${p} for ${[...x.containers, ...x.init].join("/")}`).join("; ")})`);
    }
  }
}

const probeOk = (p, path, port) => p?.httpGet?.path === path && (p.httpGet.port === port || typeof p.httpGet.port === "string");

function checkAgent(ds, where, objs) {
  const id = `${where} DaemonSet/ringside-agent`;
  const spec = ds.spec.template.spec;
  if (spec.hostNetwork !== true) fail(id, "hostNetwork is not true");
  if (spec.dnsPolicy !== "ClusterFirstWithHostNet") fail(id, `dnsPolicy ${spec.dnsPolicy}, expected ClusterFirstWithHostNet`);
  if (spec.priorityClassName !== "system-node-critical") fail(id, "priorityClassName is not system-node-critical");
  if (!(spec.tolerations ?? []).some((t) => t.key === "nvidia.com/gpu" && t.operator === "Exists" && t.effect === "NoSchedule"))
    fail(id, "no toleration nvidia.com/gpu Exists NoSchedule (the DaemonSet would skip tainted GPU nodes)");
  if (!spec.nodeSelector || Object.keys(spec.nodeSelector).length < 2) fail(id, "no GPU/RDMA nodeSelector beyond the OS");
  if (ds.spec.updateStrategy?.rollingUpdate?.maxUnavailable !== "10%") fail(id, "rollingUpdate.maxUnavailable is not 10%");
  const psc = spec.securityContext ?? {};
  if (!(psc.supplementalGroups ?? []).length) fail(id, "no supplementalGroups (the host group of umad)");
  if (!(psc.supplementalGroups ?? []).includes(NCCL_SOCKET_GID)) fail(id, `not in group ${NCCL_SOCKET_GID}: cannot give the plugin socket its group`);
  const agent = spec.containers.find((c) => c.name === "agent");
  if (!agent) return fail(id, "no container named agent");
  const r = agent.resources ?? {};
  if (!r.requests?.memory || r.requests.memory !== r.limits?.memory)
    fail(id, `memory request ${r.requests?.memory} != limit ${r.limits?.memory}`);
  if (!r.requests?.cpu) fail(id, "no CPU request");
  const rdma = Object.keys(r.limits ?? {}).filter((k) => k.startsWith("rdma/"));
  if (rdma.length !== 1 || r.requests?.[rdma[0]] !== r.limits[rdma[0]]) fail(id, "no RDMA shared device plugin resource in requests and limits");
  if (!probeOk(agent.livenessProbe, "/healthz", 9471)) fail(id, "livenessProbe is not httpGet /healthz :9471");
  if (!probeOk(agent.readinessProbe, "/readyz", 9471)) fail(id, "readinessProbe is not httpGet /readyz :9471");
  const env = Object.fromEntries((agent.env ?? []).map((e) => [e.name, e]));
  if (env.NVIDIA_VISIBLE_DEVICES?.value !== "all") fail(id, "NVIDIA_VISIBLE_DEVICES is not all");
  if (env.NVIDIA_DRIVER_CAPABILITIES?.value !== "utility") fail(id, "NVIDIA_DRIVER_CAPABILITIES is not utility");
  if (env.NODE_NAME?.valueFrom?.fieldRef?.fieldPath !== "spec.nodeName") fail(id, "NODE_NAME is not the downward API's spec.nodeName");
  if (!(agent.args ?? []).includes("--node-name=$(NODE_NAME)")) fail(id, "args lack --node-name=$(NODE_NAME)");
  const sysMount = (agent.volumeMounts ?? []).find((m) => (spec.volumes.find((v) => v.name === m.name)?.hostPath?.path) === "/sys");
  if (!sysMount || sysMount.readOnly !== true || sysMount.mountPropagation !== "HostToContainer")
    fail(id, "/sys is not mounted read-only with mountPropagation HostToContainer");
  const run = spec.volumes.find((v) => v.hostPath?.path === "/run/ringside");
  if (run?.hostPath?.type !== "DirectoryOrCreate") fail(id, "/run/ringside is not a DirectoryOrCreate hostPath");
  // The uid/gid appears in several places; they must agree.
  const prep = (spec.initContainers ?? []).find((c) => c.name === "prepare-run-dir");
  const g = prep?.command?.[prep.command.indexOf("-g") + 1];
  if (g !== String(psc.runAsGroup)) fail(id, `prepare-run-dir gives /run/ringside group ${g}, the pod runs as group ${psc.runAsGroup}`);
  const copy = (spec.initContainers ?? []).find((c) => c.name === "copy-nccl-plugin");
  if (!copy?.command?.includes("/usr/lib/ringside/libringside_nccl.so")) fail(id, "no init container copies /usr/lib/ringside/libringside_nccl.so");
  // The flag file the agent reads exists. (Where it sends, --aggregator or --shard_map and
  // --topology: checkRouting.)
  checkFlagfile(agent, spec, objs, id, "agent.flags", (flags) => {
    if (!flags.includes("--sysfs_root=/host/sys")) fail(id, "agent.flags lacks --sysfs_root=/host/sys (where /sys is mounted)");
  });
}

// The lines of the flag file `container` reads (--flagfile), or null.
function flagfileLines(container, spec, objs) {
  const arg = (container?.args ?? []).find((a) => a.startsWith("--flagfile="));
  if (!arg) return null;
  const path = arg.slice("--flagfile=".length);
  const mount = (container.volumeMounts ?? []).find((m) => path.startsWith(m.mountPath + "/"));
  const vol = mount && spec.volumes.find((v) => v.name === mount.name);
  const cm = vol?.configMap && objs.find((o) => o.kind === "ConfigMap" && o.metadata.name === vol.configMap.name);
  const text = cm?.data?.[path.slice(mount.mountPath.length + 1)];
  return text === undefined ? null : text.split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
}

function checkFlagfile(container, spec, objs, id, file, more) {
  const arg = (container.args ?? []).find((a) => a.startsWith("--flagfile="));
  if (!arg) return fail(id, "no --flagfile argument");
  const path = arg.slice("--flagfile=".length);
  const mount = (container.volumeMounts ?? []).find((m) => path.startsWith(m.mountPath + "/"));
  const vol = mount && spec.volumes.find((v) => v.name === mount.name);
  const cm = vol?.configMap && objs.find((o) => o.kind === "ConfigMap" && o.metadata.name === vol.configMap.name);
  const key = path.slice((mount?.mountPath ?? "").length + 1);
  if (!cm || key !== file || cm.data?.[key] === undefined) return fail(id, `--flagfile ${path} is not ${file} of a rendered ConfigMap`);
  const lines = cm.data[key].split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
  // Abseil reads flag files itself, without the dash-to-underscore spelling the binaries apply to
  // their command line (daemon/common/flags.h): --sysfs-root in a flag file is an unknown flag.
  for (const l of lines) {
    const name = l.split("=")[0];
    if (!/^--[a-z0-9_]+$/.test(name)) fail(id, `${file}: "${name}" is not a --flag spelled with underscores (abseil reads flag files as is)`);
  }
  // Files that flags point into the same mount must exist in the ConfigMap.
  for (const l of lines) {
    const v = l.split("=").slice(1).join("=");
    if (v.startsWith(mount.mountPath + "/") && cm.data[v.slice(mount.mountPath.length + 1)] === undefined)
      fail(id, `${file}: ${l} names a file the ConfigMap does not have`);
  }
  more(lines);
}

function checkAggregator(sts, where, objs) {
  const id = `${where} StatefulSet/${sts.metadata.name}`;
  const spec = sts.spec.template.spec;
  const c = spec.containers.find((x) => x.name === "aggregator");
  if (!c) return fail(id, "no container named aggregator");
  const port = (name) => c.ports?.find((p) => p.name === name)?.containerPort;
  if (port("grpc") !== 9472 || port("http") !== 9473) fail(id, "ports are not grpc 9472 / http 9473");
  if (c.livenessProbe?.httpGet?.path !== "/healthz" || ![9473, "http"].includes(c.livenessProbe.httpGet.port)) fail(id, "livenessProbe is not /healthz on 9473");
  if (c.readinessProbe?.httpGet?.path !== "/readyz" || ![9473, "http"].includes(c.readinessProbe.httpGet.port)) fail(id, "readinessProbe is not /readyz on 9473");
  if (!c.resources?.requests?.memory || !c.resources?.limits?.memory) fail(id, "no memory request and limit");
  const state = (c.volumeMounts ?? []).find((m) => m.mountPath === "/var/lib/ringside-aggregator");
  if (!state || !(sts.spec.volumeClaimTemplates ?? []).some((t) => t.metadata.name === state.name))
    fail(id, "/var/lib/ringside-aggregator is not a volumeClaimTemplate");
  checkFlagfile(c, spec, objs, id, "aggregator.flags", (flags) => {
    for (const f of ["--state_dir=/var/lib/ringside-aggregator", "--listen=:9472", "--http_listen=:9473"])
      if (!flags.includes(f)) fail(id, `aggregator.flags lacks ${f}`);
    if (!flags.some((f) => f.startsWith("--detection_config="))) fail(id, "aggregator.flags lacks --detection_config");
  });
  const headless = objs.find((o) => o.kind === "Service" && o.metadata.name === sts.spec.serviceName);
  if (!headless || headless.spec.clusterIP !== "None") fail(id, `serviceName ${sts.spec.serviceName} is not a headless Service`);
  else {
    const ports = headless.spec.ports.map((p) => `${p.name}:${p.port}`).sort().join(",");
    if (ports !== "grpc:9472,http:9473") fail(id, `headless Service ports ${ports}`);
  }
  if (!objs.some((o) => o.kind === "Service" && o.spec.clusterIP !== "None" && o.spec.selector?.["app.kubernetes.io/name"] === "ringside-aggregator"))
    fail(id, "no regular Service for the CLI");
  if (!objs.some((o) => o.kind === "PodDisruptionBudget" && o.spec.selector?.matchLabels?.["app.kubernetes.io/name"] === "ringside-aggregator"))
    fail(id, "no PodDisruptionBudget");
}

// Does a Kubernetes label selector (matchLabels, matchExpressions) select these labels?
function selects(sel, labels) {
  if (!sel) return false;
  labels = labels ?? {};
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of sel.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    if (e.operator === "In" && !(has && e.values.includes(labels[e.key]))) return false;
    if (e.operator === "NotIn" && has && e.values.includes(labels[e.key])) return false;
    if (e.operator === "Exists" && !has) return false;
    if (e.operator === "DoesNotExist" && has) return false;
  }
  return Object.keys(sel.matchLabels ?? {}).length + (sel.matchExpressions ?? []).length > 0;
}

// The arguments of the aggregator container of pod `ordinal` of StatefulSet `sts`, with $(VAR)
// expanded the way the kubelet does from the container's env (the downward API's pod name and
// pod-index label; a label the pod lacks is an empty value). Flag files are not expanded.
function podArgs(sts, ordinal) {
  const c = sts.spec.template.spec.containers.find((x) => x.name === "aggregator");
  const podName = `${sts.metadata.name}-${ordinal}`;
  const labels = { ...(sts.spec.template.metadata?.labels ?? {}), "apps.kubernetes.io/pod-index": String(ordinal), "statefulset.kubernetes.io/pod-name": podName };
  const expand = (s, env) => s.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, v) => env[v] ?? m);
  const env = {};
  for (const e of c?.env ?? []) {
    const f = e.valueFrom?.fieldRef?.fieldPath;
    const label = /^metadata\.labels\['([^']+)'\]$/.exec(f ?? "");
    if (e.value !== undefined) env[e.name] = expand(e.value, env);
    else if (f === "metadata.name") env[e.name] = podName;
    else if (label) env[e.name] = labels[label[1]] ?? "";
  }
  return (c?.args ?? []).map((a) => expand(a, env));
}

// The --peers of pod `ordinal` of StatefulSet `sts` ($(VAR) expanded), or null without exactly one.
function peersOf(sts, ordinal) {
  const peers = podArgs(sts, ordinal).filter((a) => a.startsWith("--peers="));
  if (peers.length !== 1) return null;
  return peers[0].slice("--peers=".length).split(",").filter(Boolean);
}

// The values of --`name`=... among flag lines (a flag file's, then the arguments after it).
const flagValues = (lines, name) => lines.filter((l) => l.startsWith(`--${name}=`)).map((l) => l.slice(name.length + 3));

// statefulset:COUNT:TEMPLATE[,TEMPLATE...] (analysis::ShardMap::FromSpec), or null.
function parseStatefulSetSpec(spec) {
  const m = /^statefulset:(\d+):(.*)$/.exec(spec);
  return m ? { count: Number(m[1]), templates: m[2].split(",").filter(Boolean) } : null;
}

// A --shard_map value against the two StatefulSets: COUNT = their replicas, and the replicas of
// shard k = pod k of each set through its headless Service, port 9472.
function checkShardMapSpec(spec, id, shards, addr) {
  const m = parseStatefulSetSpec(spec);
  if (!m) return fail(id, `--shard_map=${spec} is not statefulset:COUNT:TEMPLATE,TEMPLATE (here the shards are the StatefulSets' pods)`);
  if (m.count !== shards) fail(id, `--shard_map names ${m.count} shards, the StatefulSets have ${shards} replicas (COUNT is the shard count: the same everywhere)`);
  for (const t of m.templates) if (!t.includes("{shard}")) fail(id, `--shard_map template ${t} has no {shard}`);
  for (let k = 0; k < m.count; k++) {
    const got = m.templates.map((t) => t.replaceAll("{shard}", String(k))).sort();
    const want = AGGREGATOR_SETS.map((r) => addr(r, k)).sort();
    if (!isDeepStrictEqual(got, want)) {
      fail(id, `--shard_map gives shard ${k} the replicas ${got.join(",")}, expected ${want.join(",")} (pod ${k} of each StatefulSet through its headless Service, port ${AGGREGATOR_GRPC})`);
      break;
    }
  }
}

// The text of the file at `path` in `container` when it comes from a ConfigMap volume the pod
// mounts (items honoured), else a failure and null.
function mountedFile(container, spec, objs, path, id, what) {
  const mount = (container.volumeMounts ?? []).find((m) => path.startsWith(m.mountPath.replace(/\/$/, "") + "/"));
  const vol = mount && (spec.volumes ?? []).find((v) => v.name === mount.name);
  if (!vol?.configMap) return fail(id, `${what} ${path} is not in a mounted ConfigMap volume`), null;
  const rel = path.slice(mount.mountPath.replace(/\/$/, "").length + 1);
  const key = vol.configMap.items ? vol.configMap.items.find((i) => i.path === rel)?.key : rel;
  const cm = objs.find((o) => o.kind === "ConfigMap" && o.metadata.name === vol.configMap.name);
  const text = key === undefined ? undefined : cm?.data?.[key];
  if (text === undefined) return fail(id, `${what} ${path}: ConfigMap ${vol.configMap.name} (volume ${vol.name}) has no such key`), null;
  return text;
}

// A topology file (--topology) must have content: analysis::Topology::Parse rejects a file of
// comments and blank lines ("topology: empty"), and the program exits.
function checkTopologyFile(container, spec, objs, path, id) {
  const text = mountedFile(container, spec, objs, path, id, "--topology");
  if (text === null) return null;
  if (!text.split("\n").some((l) => l.trim() && !l.trim().startsWith("#")))
    fail(id, `--topology ${path} has nothing but comments: an empty topology is an error, the program would exit`);
  return text;
}

// Canonical a <-> b swap of a replica set's object, for "the two sets differ only in their name".
function swapReplicas(o) {
  return JSON.parse(JSON.stringify(o).replace(/ringside-aggregator-([ab])\b/g, (m, r) => `ringside-aggregator-${r === "a" ? "b" : "a"}`)
    .replace(/"ringside\/replica":"([ab])"/g, (m, r) => `"ringside/replica":"${r === "a" ? "b" : "a"}"`));
}

// Where the agents send (--aggregator: both replicas of shard 0, one shard only; or --shard_map
// over the StatefulSets' pods, with --topology from a mounted ConfigMap), and what the aggregators
// are told of the shards (--shard_map, the agents' exactly, and --shard = their pod index).
function checkRouting(objs, where, sets, shards, addr) {
  const ns = NAMESPACE;
  const id = `${where} DaemonSet/ringside-agent`;
  const ds = objs.find((o) => o.kind === "DaemonSet" && o.metadata.name === "ringside-agent");
  const spec = ds?.spec.template.spec;
  const agent = spec?.containers.find((c) => c.name === "agent");
  if (!agent) return;
  const lines = [...(flagfileLines(agent, spec, objs) ?? []), ...(agent.args ?? []).filter((a) => !a.startsWith("--flagfile="))];
  const aggFlag = flagValues(lines, "aggregator");
  const mapFlag = flagValues(lines, "shard_map");
  const topo = flagValues(lines, "topology");
  if (aggFlag.length + mapFlag.length !== 1)
    fail(id, `the agent needs exactly one of --aggregator and --shard_map (it has ${aggFlag.length} --aggregator and ${mapFlag.length} --shard_map; with both it exits)`);
  if (aggFlag.length === 1 && mapFlag.length === 0) {
    // Both replicas of every shard it lists, and nothing else.
    const listed = aggFlag[0].split(",");
    const known = new Map();
    for (let k = 0; k < shards; k++) for (const r of AGGREGATOR_SETS) known.set(addr(r, k), k);
    const listedShards = new Set();
    for (const a of listed) {
      if (!known.has(a)) fail(id, `--aggregator lists ${a}, which is no aggregator pod (ringside-aggregator-{a,b}-<shard>.ringside-aggregator-{a,b}.${ns}.svc:${AGGREGATOR_GRPC})`);
      else listedShards.add(known.get(a));
    }
    if (!listedShards.has(0)) fail(id, "--aggregator does not list shard 0");
    for (const k of listedShards)
      for (const r of AGGREGATOR_SETS) if (!listed.includes(addr(r, k))) fail(id, `--aggregator lists shard ${k} but not its replica ${addr(r, k)}`);
    if (new Set(listed).size !== listed.length) fail(id, "--aggregator lists a replica twice");
    // --aggregator is one shard: every listed replica gets everything.
    if (shards > 1) fail(id, `--aggregator with ${shards} shards: the agents send everything to what it lists, the other shards get nothing (route by --shard_map)`);
    if (topo.length) fail(id, "--topology without --shard_map: the agent reads it only to place nodes in shards");
  }
  const agentMap = mapFlag.length === 1 && aggFlag.length === 0 ? mapFlag[0] : null;
  let agentTopology = null;
  if (agentMap !== null) {
    checkShardMapSpec(agentMap, id, shards, addr);
    if (topo.length !== 1) fail(id, "routes by --shard_map without one --topology: nodes are placed by name, so the nodes of one leaf switch land on different shards (give it the aggregators' topology file)");
    else agentTopology = checkTopologyFile(agent, spec, objs, topo[0], id);
  }
  // The aggregators: per pod, the flag file's lines then the arguments ($(VAR) expanded).
  const setMaps = [];
  for (const sts of sets) {
    const sid = `${where} StatefulSet/${sts.metadata.name}`;
    const c = sts.spec.template.spec.containers.find((x) => x.name === "aggregator");
    const fileLines = flagfileLines(c, sts.spec.template.spec, objs) ?? [];
    setMaps.push(JSON.stringify((c?.args ?? []).filter((a) => a.startsWith("--shard_map="))));
    for (let k = 0; k < shards; k++) {
      const before = failures.length;
      const flags = [...fileLines, ...podArgs(sts, k).filter((a) => !a.startsWith("--flagfile="))];
      const maps = flagValues(flags, "shard_map");
      const shard = flagValues(flags, "shard");
      const map = maps.at(-1);
      if (map === undefined) {
        if (shard.length) fail(sid, `pod ${k}: --shard without --shard_map (they go together: the aggregator exits)`);
        if (agentMap !== null && shards > 1)
          fail(sid, `pod ${k}: no --shard_map, though the agents route by one over ${shards} shards: give every aggregator the agents' map and --shard=$(SHARD), or it never sees the other shards' incidents (cross-shard cause attribution)`);
      } else {
        if (k === 0) checkShardMapSpec(map, sid, shards, addr);
        if (agentMap === null) fail(sid, `pod ${k}: --shard_map=${map}, but the agents do not route by a shard map (give them the same one)`);
        else if (map !== agentMap) fail(sid, `pod ${k}: --shard_map=${map} differs from the agents' --shard_map=${agentMap} (one map everywhere, or the shards' indexes disagree)`);
        if (shard.length !== 1) fail(sid, `pod ${k}: --shard_map without exactly one --shard (it has ${shard.length}; they go together: the aggregator exits)`);
        else if (shard[0] !== String(k) && shard[0] !== `shard-${k}`)
          fail(sid, `pod ${k}: --shard=${shard[0]}, expected ${k}, its pod index (--shard=$(SHARD) with SHARD from the downward API's metadata.labels['apps.kubernetes.io/pod-index'])`);
      }
      // The aggregators' --topology (if any) has content and is the agents' file.
      const aggTopo = flagValues(flags, "topology").at(-1);
      if (k === 0 && aggTopo !== undefined) {
        const text = checkTopologyFile(c, sts.spec.template.spec, objs, aggTopo, sid);
        if (text !== null && agentTopology !== null && text !== agentTopology)
          fail(sid, `--topology ${aggTopo} is not the agents' topology file: nodes would be placed by one map and judged by another`);
      }
      if (failures.length > before) break; // one pod's failures say it
    }
  }
  if (setMaps[0] !== setMaps[1]) fail(where, "ringside-aggregator-a and -b have different --shard_map arguments");
}

// The aggregator's server certificate (cert-manager) names every pod the agents, the peers and
// the other shards dial: ringside-aggregator-<a|b>-<k>.ringside-aggregator-<a|b>.<ns>.svc.
function checkAggregatorCertificate(objs, where) {
  const cert = objs.find((o) => o.kind === "Certificate" && o.spec?.secretName === "ringside-aggregator-tls");
  if (!cert) return;
  const shards = objs.find((o) => o.kind === "StatefulSet" && o.metadata.name === "ringside-aggregator-a")?.spec.replicas ?? 1;
  for (let k = 0; k < shards; k++)
    for (const r of AGGREGATOR_SETS) {
      const host = `ringside-aggregator-${r}-${k}.ringside-aggregator-${r}.${NAMESPACE}.svc`;
      if (!(cert.spec.dnsNames ?? []).includes(host)) fail(`${where} Certificate/${cert.metadata.name}`, `dnsNames lack ${host} (shard ${k}, replica ${r}): TLS to that pod fails`);
    }
}

// The agent's flag lines (flag file, then arguments) in `objs`, or null.
function agentFlagLines(objs) {
  const ds = objs.find((o) => o.kind === "DaemonSet" && o.metadata.name === "ringside-agent");
  const agent = ds?.spec.template.spec.containers.find((c) => c.name === "agent");
  return agent ? flagfileLines(agent, ds.spec.template.spec, objs) : null;
}

// examples/shards replaces the base's agent.flags: beyond the routing flags it must stay the same.
function checkShardsExampleFlags(base, example, where) {
  const routing = /^--(aggregator|shard_map|topology)=/;
  const rest = (objs) => (agentFlagLines(objs) ?? []).filter((l) => !routing.test(l));
  const b = rest(base);
  const e = rest(example);
  if (!isDeepStrictEqual(b, e))
    fail(`${where} ConfigMap/ringside-agent`, `agent.flags differs from the base's beyond --aggregator -> --shard_map and --topology (edit both alike): only in the base ${b.filter((l) => !e.includes(l)).join(" ") || "-"}; only here ${e.filter((l) => !b.includes(l)).join(" ") || "-"}`);
}

// One shard x two replicas (or N shards x two): the replica sets, their anti-affinity, --peers,
// where the agents send (checkRouting), the Services, the PodDisruptionBudget and the NetworkPolicy.
function checkReplicas(objs, where) {
  const ns = NAMESPACE;
  const sets = AGGREGATOR_SETS.map((r) => objs.find((o) => o.kind === "StatefulSet" && o.metadata.name === `ringside-aggregator-${r}`));
  if (sets.some((x) => !x)) return;
  const aggStatefulSets = objs.filter((o) => o.kind === "StatefulSet" && o.spec?.template?.metadata?.labels?.["app.kubernetes.io/name"] === "ringside-aggregator");
  if (aggStatefulSets.length !== AGGREGATOR_SETS.length)
    fail(where, `${aggStatefulSets.length} aggregator StatefulSets (${aggStatefulSets.map((o) => o.metadata.name).join(", ")}), expected ringside-aggregator-a and -b`);
  const shards = sets[0].spec.replicas ?? 1;
  if ((sets[1].spec.replicas ?? 1) !== shards) fail(where, `ringside-aggregator-a has ${shards} replicas, -b ${sets[1].spec.replicas}: replicas is the shard count, the same in both`);
  const addr = (r, k) => `ringside-aggregator-${r}-${k}.ringside-aggregator-${r}.${ns}.svc:${AGGREGATOR_GRPC}`;
  const podLabels = sets.map((x) => x.spec.template.metadata.labels ?? {});
  AGGREGATOR_SETS.forEach((r, i) => {
    const sts = sets[i];
    const other = AGGREGATOR_SETS[1 - i];
    const id = `${where} StatefulSet/${sts.metadata.name}`;
    if (podLabels[i]["ringside/replica"] !== r) fail(id, `pod label ringside/replica is ${podLabels[i]["ringside/replica"]}, expected ${r}`);
    if (!selects(sts.spec.selector, podLabels[i]) || selects(sts.spec.selector, podLabels[1 - i]))
      fail(id, "its selector does not select its own pods only (the two sets' selectors must not overlap)");
    // Required anti-affinity on the node: no pod of the other set on this pod's node.
    const terms = sts.spec.template.spec.affinity?.podAntiAffinity?.requiredDuringSchedulingIgnoredDuringExecution ?? [];
    const apart = terms.some((t) => t.topologyKey === "kubernetes.io/hostname" && selects(t.labelSelector, podLabels[1 - i]) && (!t.namespaces || t.namespaces.includes(ns)));
    if (!apart) fail(id, `no required podAntiAffinity on kubernetes.io/hostname against ringside-aggregator-${other}'s pods: both replicas of a shard may land on one node`);
    // --peers: the other replica of the same shard, and nothing else.
    for (let k = 0; k < shards; k++) {
      const peers = peersOf(sts, k);
      const want = addr(other, k);
      if (!peers) fail(id, "container aggregator has no (or more than one) --peers argument");
      else if (peers.length !== 1 || peers[0] !== want)
        fail(id, `pod ${k}: --peers=${peers.join(",")}, expected ${want} (the other replica of shard ${k}, and only it)`);
      if (peers?.includes(addr(r, k))) fail(id, `pod ${k}: --peers names the pod itself`);
      if (!peers) break;
    }
    // Its headless Service selects its own pods only.
    const svc = objs.find((o) => o.kind === "Service" && o.metadata.name === sts.spec.serviceName);
    if (sts.spec.serviceName !== sts.metadata.name) fail(id, `serviceName ${sts.spec.serviceName}, expected ${sts.metadata.name} (the agents' and peers' addresses)`);
    if (svc && (!selects({ matchLabels: svc.spec.selector }, podLabels[i]) || selects({ matchLabels: svc.spec.selector }, podLabels[1 - i])))
      fail(id, `headless Service ${svc.metadata.name} does not select this set's pods only`);
  });
  // The two sets differ only in a <-> b (--shard_map names both sets in one order, the same in
  // both: checkRouting).
  const mapsBlanked = (o) => {
    const x = structuredClone(o);
    for (const c of x.spec.template.spec.containers) if (c.args) c.args = c.args.map((a) => (a.startsWith("--shard_map=") ? "--shard_map=" : a));
    return x;
  };
  if (!isDeepStrictEqual(swapReplicas(mapsBlanked(sets[1])), mapsBlanked(sets[0])))
    fail(where, "StatefulSets ringside-aggregator-a and -b differ beyond a <-> b (edit both alike)");
  checkRouting(objs, where, sets, shards, addr);
  // The CLI's Service, the PodDisruptionBudget and the aggregator's NetworkPolicy cover both sets;
  // one budget, not one per set (a pod two budgets select cannot be evicted).
  const cli = objs.find((o) => o.kind === "Service" && o.metadata.name === "ringside-aggregator-query");
  if (!cli || !podLabels.every((l) => selects({ matchLabels: cli.spec.selector }, l))) fail(where, "Service ringside-aggregator-query does not select both replica sets");
  const pdbs = objs.filter((o) => o.kind === "PodDisruptionBudget" && podLabels.some((l) => selects(o.spec.selector, l)));
  if (pdbs.length !== 1 || !podLabels.every((l) => selects(pdbs[0].spec.selector, l)) || pdbs[0].spec.maxUnavailable !== 1)
    fail(where, `expected one PodDisruptionBudget with maxUnavailable 1 over both replica sets, found ${pdbs.map((o) => o.metadata.name).join(", ") || "none"}`);
  const np = objs.find((o) => o.kind === "NetworkPolicy" && o.metadata.name === "ringside-aggregator");
  const peerOk = (np?.spec.ingress ?? []).some((r) => (r.ports ?? []).some((p) => p.port === AGGREGATOR_GRPC) && (r.from ?? []).some((f) => !f.namespaceSelector && podLabels.every((l) => selects(f.podSelector, l))));
  if (!peerOk) fail(`${where} NetworkPolicy/ringside-aggregator`, `${AGGREGATOR_GRPC} does not admit the aggregator's own pods (a replica asks its --peers)`);
}

// Prometheus' relabel `replace` (anchored regex, $1 references), enough for the checks below.
function relabelReplace(rule, labels) {
  const value = (rule.sourceLabels ?? []).map((l) => labels[l] ?? "").join(rule.separator ?? ";");
  const m = new RegExp(`^(?:${rule.regex ?? "(.*)"})$`).exec(value);
  if (!m) return labels;
  const out = (rule.replacement ?? "$1").replace(/\$\{?(\d+)\}?/g, (x, n) => m[Number(n)] ?? "");
  return { ...labels, [rule.targetLabel]: out };
}

// The aggregator's ServiceMonitor: both replica sets' headless Services, job="ringside-aggregator",
// and the target labels that make a pair differ by `replica` alone.
function checkServiceMonitor(sm, objs, where) {
  const id = `${where} ServiceMonitor/${sm?.metadata?.name}`;
  if (!sm) return fail(where, "no ServiceMonitor");
  const svc = objs.filter((o) => o.kind === "Service" && selects(sm.spec.selector, o.metadata.labels));
  const want = AGGREGATOR_SETS.map((r) => `ringside-aggregator-${r}`);
  const names = svc.map((o) => o.metadata.name).sort();
  if (!isDeepStrictEqual(names, want) || svc.some((o) => o.spec.clusterIP !== "None"))
    return fail(id, `selects ${names.join(",") || "no Service"}, expected the headless ${want.join(", ")}`);
  for (const o of svc) {
    const job = sm.spec.jobLabel ? o.metadata.labels?.[sm.spec.jobLabel] : o.metadata.name;
    if (job !== "ringside-aggregator") fail(id, `Service ${o.metadata.name} is scraped as job="${job}", expected "ringside-aggregator" (the rules' job)`);
    if (!(sm.spec.endpoints ?? []).every((e) => o.spec.ports.some((p) => p.name === e.port))) fail(id, `an endpoint names a port Service ${o.metadata.name} does not have`);
  }
  // Simulate the target labels of pod k of each set (the operator's own labels first).
  for (const e of sm.spec.endpoints ?? []) {
    const targets = [];
    for (const r of AGGREGATOR_SETS) {
      for (const k of [0, 1]) {
        let l = { __meta_kubernetes_pod_name: `ringside-aggregator-${r}-${k}`, pod: `ringside-aggregator-${r}-${k}`, service: `ringside-aggregator-${r}`, instance: `10.0.0.${k}:9473`, job: "ringside-aggregator", endpoint: e.port, namespace: NAMESPACE };
        for (const rule of e.relabelings ?? []) {
          const action = (rule.action ?? "replace").toLowerCase();
          if (action === "replace") l = relabelReplace(rule, l);
          else if (action === "labeldrop") l = Object.fromEntries(Object.entries(l).filter(([key]) => !new RegExp(`^(?:${rule.regex})$`).test(key)));
          else fail(id, `relabeling action ${rule.action} is not simulated by this test`);
        }
        const visible = Object.fromEntries(Object.entries(l).filter(([key]) => !key.startsWith("__")));
        if (visible.replica !== r) fail(id, `pod ringside-aggregator-${r}-${k} gets replica="${visible.replica}", expected "${r}" (a target label from the pod's name)`);
        targets.push([r, k, visible]);
      }
    }
    // A pair differs by `replica` alone; different shards do not collide.
    const key = (v) => JSON.stringify(Object.entries(v).filter(([x]) => x !== "replica").sort());
    for (const [r, k, v] of targets)
      for (const [r2, k2, v2] of targets) {
        if (k === k2 && r !== r2 && key(v) !== key(v2)) fail(id, `replicas ${r} and ${r2} of shard ${k} differ beyond replica: ${key(v)} vs ${key(v2)}`);
        if (k !== k2 && key(v) === key(v2)) fail(id, `shards ${k} and ${k2} get the same target labels`);
      }
  }
}

function checkNetworkPolicies(objs, where) {
  const np = (name) => objs.find((o) => o.kind === "NetworkPolicy" && o.metadata.name === name);
  const fromPrometheusOnly = (rule) =>
    rule.from?.length > 0 && rule.from.every((f) => !f.ipBlock && f.podSelector?.matchLabels?.["app.kubernetes.io/name"] === "prometheus");
  const rulesFor = (p, port) => (p?.spec?.ingress ?? []).filter((r) => (r.ports ?? []).some((x) => x.port === port));
  const agent = np("ringside-agent");
  const a = rulesFor(agent, 9471);
  if (!a.length || !a.every(fromPrometheusOnly)) fail(`${where} NetworkPolicy/ringside-agent`, "9471 is not open to Prometheus only");
  const agg = np("ringside-aggregator");
  const m = rulesFor(agg, 9473);
  if (!m.length || !m.every(fromPrometheusOnly)) fail(`${where} NetworkPolicy/ringside-aggregator`, "9473 is not open to Prometheus only");
  const g = rulesFor(agg, 9472);
  if (!g.length || !g.some((r) => r.from?.some((f) => f.podSelector?.matchLabels?.["ringside/aggregator-client"] === "true")))
    fail(`${where} NetworkPolicy/ringside-aggregator`, "9472 does not admit pods labelled ringside/aggregator-client=true");
  for (const p of [agent, agg]) if (p && !(p.spec.policyTypes ?? []).includes("Ingress")) fail(`${where} NetworkPolicy/${p.metadata.name}`, "policyTypes lacks Ingress");
}

function checkTarget(where, objs) {
  const count = (kind) => objs.filter((o) => o.kind === kind).length;
  for (const o of objs) {
    if (o.kind !== "Namespace" && o.metadata?.namespace !== NAMESPACE) fail(`${where} ${o.kind}/${o.metadata?.name}`, `namespace ${o.metadata?.namespace}, expected ${NAMESPACE}`);
    checkWorkloadPolicy(o, where);
  }
  const ns = objs.filter((o) => o.kind === "Namespace");
  if (ns.length !== 1 || ns[0].metadata.name !== NAMESPACE || ns[0].metadata.labels?.["pod-security.kubernetes.io/enforce"] !== "privileged")
    fail(where, `expected one Namespace ${NAMESPACE} labelled pod-security.kubernetes.io/enforce=privileged`);
  const ds = objs.find((o) => o.kind === "DaemonSet" && o.metadata.name === "ringside-agent");
  if (!ds) fail(where, "no DaemonSet ringside-agent");
  else checkAgent(ds, where, objs);
  for (const name of AGGREGATOR_SETS.map((r) => `ringside-aggregator-${r}`)) {
    const sts = objs.find((o) => o.kind === "StatefulSet" && o.metadata.name === name);
    if (!sts) {
      fail(where, `no StatefulSet ${name}`);
      continue;
    }
    checkAggregator(sts, where, objs);
    if (sts.spec.template.spec.securityContext?.runAsUser !== ds?.spec.template.spec.securityContext?.runAsUser)
      fail(where, "the agent and the aggregator run as different uids (one image, one user)");
  }
  checkReplicas(objs, where);
  checkNetworkPolicies(objs, where);
  // Optional kinds stay out of the base: a cluster without their CRDs must apply it cleanly.
  const monitoring = objs.filter((o) => o.apiVersion?.startsWith("monitoring.coreos.com/")).length;
  const certs = objs.filter((o) => o.apiVersion?.startsWith("cert-manager.io/")).length;
  const wantsMonitoring = ["overlays/prometheus-operator", "examples/all-components"].includes(where);
  const wantsCerts = ["overlays/cert-manager", "examples/all-components"].includes(where);
  if (wantsMonitoring ? monitoring !== 3 : monitoring) fail(where, `${monitoring} prometheus-operator objects (expected ${wantsMonitoring ? "ServiceMonitor, PodMonitor, PrometheusRule" : "none"})`);
  if (wantsMonitoring && (count("ServiceMonitor") !== 1 || count("PodMonitor") !== 1 || count("PrometheusRule") !== 1))
    fail(where, "expected one ServiceMonitor, one PodMonitor, one PrometheusRule");
  if (wantsMonitoring) {
    // The monitors must find what they scrape, under the job names the rules use.
    const sm = objs.find((o) => o.kind === "ServiceMonitor");
    checkServiceMonitor(sm, objs, where);
    const pm = objs.find((o) => o.kind === "PodMonitor");
    const podLabels = ds?.spec.template.metadata.labels ?? {};
    if (!Object.entries(pm?.spec.selector?.matchLabels ?? {}).every(([k, v]) => podLabels[k] === v)) fail(where, "PodMonitor does not select the agent pods");
    if (podLabels[pm?.spec.jobLabel] !== "ringside-agent") fail(where, `PodMonitor jobLabel ${pm?.spec.jobLabel} does not give job="ringside-agent"`);
    const agentPorts = (ds?.spec.template.spec.containers ?? []).flatMap((c) => c.ports ?? []).map((p) => p.name);
    if (!(pm?.spec.podMetricsEndpoints ?? []).every((e) => agentPorts.includes(e.port))) fail(where, "a PodMonitor endpoint names a port the agent does not have");
  }
  if (wantsCerts ? certs === 0 : certs) fail(where, `${certs} cert-manager objects`);
  if (wantsCerts) {
    checkAggregatorCertificate(objs, where);
    const secrets = objs.filter((o) => o.kind === "Certificate").map((o) => o.spec.secretName);
    for (const s of ["ringside-agent-tls", "ringside-aggregator-tls"])
      if (!secrets.includes(s)) fail(where, `no Certificate writes Secret ${s}, which the base mounts`);
  }
  // Issue #24: with the web-tls component, both daemons take the web configuration, the probes
  // speak HTTPS, and the monitors scrape over https with a client certificate, checking the
  // daemons' certificate (no insecureSkipVerify anywhere).
  for (const o of objs.filter((x) => x.apiVersion?.startsWith("monitoring.coreos.com/"))) {
    for (const e of [...(o.spec?.endpoints ?? []), ...(o.spec?.podMetricsEndpoints ?? [])]) {
      if (e.tlsConfig?.insecureSkipVerify) fail(where, `${o.kind}/${o.metadata.name}: insecureSkipVerify`);
    }
  }
  if (where === "examples/all-components") {
    const workloads = objs.filter((o) => ["DaemonSet", "StatefulSet"].includes(o.kind));
    for (const w of workloads) {
      const c = w.spec.template.spec.containers[0];
      const id = `${where} ${w.kind}/${w.metadata.name}`;
      if (!(c.args ?? []).includes("--web-config-file=/etc/ringside/web/web-config.yml")) fail(id, "no --web-config-file");
      if (c.livenessProbe?.httpGet?.scheme !== "HTTPS" || c.readinessProbe?.httpGet?.scheme !== "HTTPS") fail(id, "probes are not HTTPS");
      const secretVols = (w.spec.template.spec.volumes ?? []).filter((v) => v.secret).map((v) => v.secret.secretName);
      if (!secretVols.includes("ringside-metrics-tls")) fail(id, "does not mount ringside-metrics-tls");
    }
    const certSecrets = objs.filter((o) => o.kind === "Certificate").map((o) => o.spec.secretName);
    for (const sname of ["ringside-metrics-tls", "ringside-prometheus-tls"])
      if (!certSecrets.includes(sname)) fail(where, `no Certificate writes ${sname}`);
    const cm = objs.find((o) => o.kind === "ConfigMap" && o.metadata.name.startsWith("ringside-web-config"));
    const web = cm ? YAML.parse(cm.data["web-config.yml"]) : null;
    if (web?.tls_server_config?.client_auth_type !== "RequireAndVerifyClientCert" || !web?.tls_server_config?.client_ca_file)
      fail(where, "the web config does not require verified client certificates");
    for (const o of objs.filter((x) => ["ServiceMonitor", "PodMonitor"].includes(x.kind))) {
      for (const e of [...(o.spec.endpoints ?? []), ...(o.spec.podMetricsEndpoints ?? [])]) {
        const t = e.tlsConfig ?? {};
        if (e.scheme !== "https" || !t.ca || !t.cert || !t.keySecret || !t.serverName)
          fail(where, `${o.kind}/${o.metadata.name} does not scrape over https with a client certificate and a checked server name`);
      }
    }
    const flags = objs.find((o) => o.kind === "ConfigMap" && o.metadata.name.startsWith("ringside-aggregator"))?.data?.["aggregator.flags"] ?? "";
    if (!/^--reader_identities=.*ringside-aggregator-\*/m.test(flags)) fail(where, "the aggregators cannot read each other (--reader_identities)");
  }
  const rc = ds?.spec.template.spec.runtimeClassName;
  const wantsRc = ["overlays/nvidia-runtime", "examples/all-components"].includes(where);
  if (wantsRc ? rc !== "nvidia" : rc !== undefined) fail(where, `runtimeClassName ${rc}`);
}

function checkTrainingExample(o, where) {
  const id = `${where} ${o.kind}/${o.metadata?.name}`;
  const spec = podSpecOf(o);
  if (!spec) return fail(id, "not a workload");
  const hp = Object.fromEntries((spec.volumes ?? []).filter((v) => v.hostPath).map((v) => [v.name, v.hostPath.path]));
  const c = spec.containers[0];
  const mounts = (c.volumeMounts ?? []).filter((m) => hp[m.name]);
  const paths = mounts.map((m) => hp[m.name]).sort().join(",");
  if (paths !== "/opt/ringside/lib,/run/ringside") fail(id, `hostPath mounts ${paths}, expected /opt/ringside/lib and /run/ringside`);
  for (const m of mounts) if (m.readOnly !== true) fail(id, `mounts ${hp[m.name]} read-write`);
  if (spec.hostPID || spec.hostNetwork || spec.hostIPC) fail(id, "uses host namespaces");
  const env = Object.fromEntries((c.env ?? []).map((e) => [e.name, e]));
  if (env.NCCL_PROFILER_PLUGIN?.value !== "/opt/ringside/lib/libringside_nccl.so") fail(id, "NCCL_PROFILER_PLUGIN is not /opt/ringside/lib/libringside_nccl.so");
  if (env.POD_NAME?.valueFrom?.fieldRef?.fieldPath !== "metadata.name") fail(id, "POD_NAME is not the downward API's metadata.name");
  if (env.POD_NAMESPACE?.valueFrom?.fieldRef?.fieldPath !== "metadata.namespace") fail(id, "POD_NAMESPACE is not the downward API's metadata.namespace");
  const groups = spec.securityContext?.supplementalGroups ?? [];
  if (!groups.includes(NCCL_SOCKET_GID)) fail(id, `not in group ${NCCL_SOCKET_GID} (the socket's group)`);
  if (groups.includes(RINGSIDE_ID)) fail(id, `in group ${RINGSIDE_ID}, the agent's (which may open umad on the host)`);
}

// ---------------------------------------------------------------------------------------------
// The PrometheusRule and its source

function checkPrometheusRule() {
  const where = "components/prometheus-operator/prometheusrule.yaml";
  const committed = readFileSync(join(K8S, "components/prometheus-operator/prometheusrule.yaml"), "utf8");
  const generated = execFileSync("sh", [join(K8S, "gen-prometheusrule.sh"), "--stdout"], { encoding: "utf8" });
  if (committed !== generated) fail(where, "differs from `deploy/kubernetes/gen-prometheusrule.sh --stdout`: run deploy/kubernetes/gen-prometheusrule.sh and commit the result");
  const rule = YAML.parse(committed);
  const source = YAML.parse(readFileSync(join(ROOT, "deploy/prometheus/rules/ringside.rules.yml"), "utf8"));
  if (!isDeepStrictEqual(rule?.spec?.groups, source?.groups)) fail(where, "spec.groups differ from deploy/prometheus/rules/ringside.rules.yml groups");
  const alerts = (source?.groups ?? []).flatMap((g) => g.rules).filter((r) => r.alert).length;
  if (alerts === 0) fail(where, "the source rule file has no alerts (parsing went wrong?)");
  checkRulesAcrossReplicas(source, "deploy/prometheus/rules/ringside.rules.yml");
}

// Both aggregator replicas export the same series, differing by the target label `replica`: a
// rule on them that kept it would record twice and alert twice. No rule sets `replica`.
const AGGREGATOR_SERIES = /ringside_incidents_open|ringside_aggregator_|ringside_collective_|job="ringside-aggregator"/;
function checkRulesAcrossReplicas(source, where) {
  for (const r of (source?.groups ?? []).flatMap((g) => g.rules ?? [])) {
    const name = r.alert ?? r.record;
    if (Object.hasOwn(r.labels ?? {}, "replica")) fail(where, `${name} sets a label named replica (replica is a target label only)`);
    if (AGGREGATOR_SERIES.test(r.expr ?? "") && !/without\s*\(\s*replica\s*\)/.test(r.expr))
      fail(where, `${name} uses the aggregator's series without aggregating \`replica\` away (max/min without (replica)): two replicas would make it fire or record twice`);
  }
}

// ---------------------------------------------------------------------------------------------
// The flag files, read by the programs themselves

function runsWith(bin, argv, id) {
  try {
    execFileSync(bin, argv, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 30_000 });
    return true;
  } catch (e) {
    fail(id, `${bin} ${argv.join(" ")} failed (exit ${e.status}): ${(e.stderr || e.message).trim().split("\n").slice(0, 3).join(" | ")}`);
    return false;
  }
}

function checkFlagfilesWithPrograms(rendered) {
  const seen = new Set();
  // The arguments the StatefulSets add to the flag file (--peers) are flags the aggregator knows.
  if (args["aggregator-bin"]) {
    for (const [where, objs] of Object.entries(rendered)) {
      for (const sts of objs.filter((o) => o.kind === "StatefulSet")) {
        const extra = (sts.spec.template.spec.containers.find((c) => c.name === "aggregator")?.args ?? []).filter((a) => !a.startsWith("--flagfile="));
        const key = JSON.stringify(extra);
        if (!extra.length || seen.has(key)) continue;
        seen.add(key);
        if (runsWith(args["aggregator-bin"], [...extra, "--list-detection-options"], `${where} StatefulSet/${sts.metadata.name}`))
          console.log(`  ${where}: ringside-aggregator accepts ${sts.metadata.name}'s arguments ${extra.join(" ")}`);
      }
    }
  }
  for (const [where, objs] of Object.entries(rendered)) {
    for (const cm of objs.filter((o) => o.kind === "ConfigMap")) {
      const key = JSON.stringify(cm.data);
      if (seen.has(key)) continue;
      seen.add(key);
      const id = `${where} ConfigMap/${cm.metadata.name}`;
      const dir = mkdtempSync(join(tmpdir(), "ringside-flags-"));
      try {
        for (const [k, v] of Object.entries(cm.data ?? {})) writeFileSync(join(dir, k), v);
        if (cm.data?.["agent.flags"] !== undefined && args["agent-bin"]) {
          // --once reads the (absent) sysfs root and exits; flags are parsed first.
          if (runsWith(args["agent-bin"], [`--flagfile=${join(dir, "agent.flags")}`, "--node-name=probe", "--once", "-o", "json", "--nvml-library="], id))
            console.log(`  ${where}: ringside-agent accepts agent.flags`);
        }
        if (cm.data?.["aggregator.flags"] !== undefined && args["aggregator-bin"]) {
          // The files the flags name are read from the ConfigMap's copy.
          const flags = cm.data["aggregator.flags"].replaceAll("/etc/ringside/aggregator/", dir + "/");
          writeFileSync(join(dir, "aggregator.flags"), flags);
          if (runsWith(args["aggregator-bin"], [`--flagfile=${join(dir, "aggregator.flags")}`, "--list-detection-options"], id))
            console.log(`  ${where}: ringside-aggregator accepts aggregator.flags and detection.conf`);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  }
}

// Sharding, run by the programs themselves: each aggregator pod of a target whose agents route by
// --shard_map starts with its rendered flag file and arguments ($(SHARD) expanded) and must log
// that it is shard k of N; the agent, named after the first node of the topology, must log the
// shard it is placed in by that node's leaf switch. The ConfigMap volumes are written to a temporary
// folder and the paths rewritten; what needs a cluster (listen addresses, TLS files, the state
// volume) is overridden after them. The agent then exits (no CA file), the aggregator is stopped.

// The last lines of a program's log, without the refusals to dial the cluster's names in plaintext.
const logTail = (out) => out.trim().split("\n").filter((l) => !l.includes("refusing plaintext")).slice(-2).join(" | ");

// Runs `bin` until a line matches `pattern` (then SIGTERM), it exits, or `ms` pass.
function runUntil(bin, argv, pattern, ms) {
  return new Promise((resolve) => {
    const p = spawn(bin, argv, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let matched = null;
    const timer = setTimeout(() => p.kill("SIGKILL"), ms);
    const onData = (d) => {
      out += d;
      if (!matched && (matched = out.match(pattern))) p.kill("SIGTERM");
    };
    p.stdout.on("data", onData);
    p.stderr.on("data", onData);
    p.on("error", (e) => { out += String(e); });
    p.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ matched, out, code, signal });
    });
  });
}

// Writes the ConfigMap volumes `container` mounts under `dir` (items honoured) and returns a
// function that rewrites their mount paths in a string; the files' own texts are rewritten too.
function materializeConfigMaps(container, spec, objs, dir) {
  const mounts = [];
  for (const m of container.volumeMounts ?? []) {
    const v = (spec.volumes ?? []).find((x) => x.name === m.name);
    const cm = v?.configMap && objs.find((o) => o.kind === "ConfigMap" && o.metadata.name === v.configMap.name);
    if (cm) mounts.push([m.mountPath.replace(/\/$/, ""), join(dir, m.name), cm, v.configMap.items]);
  }
  const rewrite = (str) => mounts.reduce((acc, [from, to]) => acc.replaceAll(from + "/", to + "/"), str);
  for (const [, to, cm, items] of mounts) {
    mkdirSync(to, { recursive: true });
    for (const [key, path] of items ? items.map((i) => [i.key, i.path]) : Object.keys(cm.data ?? {}).map((k) => [k, k]))
      if (cm.data?.[key] !== undefined) writeFileSync(join(to, path), rewrite(cm.data[key]));
  }
  return rewrite;
}

async function checkShardingWithPrograms(rendered) {
  for (const [where, objs] of Object.entries(rendered)) {
    const ds = objs.find((o) => o.kind === "DaemonSet" && o.metadata.name === "ringside-agent");
    const agent = ds?.spec.template.spec.containers.find((c) => c.name === "agent");
    const agentMap = flagValues(agentFlagLines(objs) ?? [], "shard_map")[0];
    if (!agent || agentMap === undefined) continue;
    const sets = AGGREGATOR_SETS.map((r) => objs.find((o) => o.kind === "StatefulSet" && o.metadata.name === `ringside-aggregator-${r}`));
    if (sets.some((x) => !x)) continue;
    const shards = sets[0].spec.replicas ?? 1;
    const dir = mkdtempSync(join(tmpdir(), "ringside-shards-"));
    try {
      if (args["aggregator-bin"]) {
        const runs = [];
        for (const sts of sets)
          for (let k = 0; k < shards; k++) {
            const podDir = join(dir, `${sts.metadata.name}-${k}`);
            const spec = sts.spec.template.spec;
            const c = spec.containers.find((x) => x.name === "aggregator");
            const rewrite = materializeConfigMaps(c, spec, objs, podDir);
            mkdirSync(join(podDir, "state"));
            const argv = [
              ...podArgs(sts, k).map(rewrite),
              "--listen=127.0.0.1:0", "--http_listen=127.0.0.1:0", `--state_dir=${join(podDir, "state")}`,
              "--tls_cert=", "--tls_key=", "--tls_ca=", "--peer_timeout=1s",
            ];
            const want = new RegExp(`shard shard-${k} of ${shards}: watching the incidents of the other ${shards - 1}\\b`);
            runs.push(runUntil(args["aggregator-bin"], argv, want, 60_000).then((r) => [sts.metadata.name, k, r]));
          }
        for (const [name, k, r] of await Promise.all(runs)) {
          if (r.matched) console.log(`  ${where}: ringside-aggregator pod ${name}-${k} starts as ${r.matched[0].split(":")[0]}`);
          else fail(`${where} StatefulSet/${name}`, `pod ${k}: ringside-aggregator did not start as shard-${k} of ${shards} (exit ${r.code ?? r.signal}): ${logTail(r.out)}`);
        }
      }
      if (args["agent-bin"]) {
        const spec = ds.spec.template.spec;
        const rewrite = materializeConfigMaps(agent, spec, objs, join(dir, "agent"));
        // The first node the topology names, when it is "node switch" lines.
        const topoPath = flagValues(agentFlagLines(objs) ?? [], "topology")[0];
        const topo = topoPath && mountedFile(agent, spec, objs, topoPath, `${where} DaemonSet/ringside-agent`, "--topology");
        const first = (topo ?? "").split("\n").map((l) => l.replace(/#.*/, "").trim().split(/\s+/)).find((f) => f.length === 2 && f[0]);
        const node = first ? first[0] : "probe-node";
        const argv = [
          ...(agent.args ?? []).map((a) => rewrite(a.replaceAll("$(NODE_NAME)", node))),
          "--listen=127.0.0.1:0", `--collectives_socket=${join(dir, "collectives.sock")}`, "--link_events=false", "--nvml_library=",
        ];
        const placed = first ? `leaf:${first[1]}` : `node:${node}`;
        const m = parseStatefulSetSpec(agentMap);
        const r = await runUntil(args["agent-bin"], argv, /shard shard-(\d+) of (\d+) \(placed by ([^)]*)\): counters to (\S+)/, 60_000);
        const id = `${where} DaemonSet/ringside-agent`;
        if (!r.matched) fail(id, `ringside-agent --node-name=${node} logged no shard (exit ${r.code ?? r.signal}): ${logTail(r.out)}`);
        else {
          const [, k, n, by, to] = r.matched;
          const want = m ? m.templates.map((t) => t.replaceAll("{shard}", k)).join(",") : "?";
          if (Number(n) !== shards || by !== placed || to !== want)
            fail(id, `ringside-agent --node-name=${node}: "${r.matched[0]}", expected shard-<k> of ${shards}, placed by ${placed}, counters to that shard's replicas`);
          else console.log(`  ${where}: ringside-agent --node-name=${node} is placed in shard-${k} of ${n} by ${by}, counters to ${to}`);
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Self-test: broken objects must be rejected

async function selfTest(base, monitored, sharded, withCerts) {
  const ds0 = base.find((o) => o.kind === "DaemonSet");
  const rule0 = YAML.parse(readFileSync(join(K8S, "components/prometheus-operator/prometheusrule.yaml"), "utf8"));
  const cases = [
    ["a typo hostNetwrok in the pod spec", ds0, (o) => { o.spec.template.spec.hostNetwrok = true; }, "schema"],
    ["a typo in a container field (readOnlyRootFileSystem)", ds0, (o) => { o.spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem = true; }, "schema"],
    ["mountPropagation Sideways", ds0, (o) => { o.spec.template.spec.containers[0].volumeMounts[0].mountPropagation = "Sideways"; }, "schema"],
    ["a privileged agent", ds0, (o) => { o.spec.template.spec.containers[0].securityContext.privileged = true; }, "policy"],
    ["hostPID", ds0, (o) => { o.spec.template.spec.hostPID = true; }, "policy"],
    ["capability SYS_ADMIN", ds0, (o) => { o.spec.template.spec.containers[0].securityContext.capabilities.add = ["SYS_ADMIN"]; }, "policy"],
    ["a CPU limit", ds0, (o) => { o.spec.template.spec.containers[0].resources.limits.cpu = "1"; }, "policy"],
    ["/sys mounted read-write", ds0, (o) => { o.spec.template.spec.containers[0].volumeMounts.find((m) => m.mountPath === "/host/sys").readOnly = false; }, "policy"],
    ["an init container running as root with a capability", ds0, (o) => { o.spec.template.spec.initContainers[0].securityContext.capabilities.add = ["NET_ADMIN"]; }, "policy"],
    ["a PrometheusRule group with `intervall`", rule0, (o) => { o.spec.groups[0].intervall = "15s"; }, "schema"],
    ["a rule without expr", rule0, (o) => { delete o.spec.groups[0].rules[0].expr; }, "schema"],
  ];
  // The replica checks run on the whole rendered base, one object broken:
  // [what, kind, name, break it, a phrase the failure must contain].
  const replicaCases = [
    ["ringside-aggregator-b without its anti-affinity", "StatefulSet", "ringside-aggregator-b", (o) => { delete o.spec.template.spec.affinity; }, "no required podAntiAffinity"],
    ["anti-affinity on the zone only", "StatefulSet", "ringside-aggregator-a", (o) => { o.spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey = "topology.kubernetes.io/zone"; }, "no required podAntiAffinity"],
    ["--peers naming the replica itself", "StatefulSet", "ringside-aggregator-a", (o) => { const c = o.spec.template.spec.containers[0]; c.args = c.args.map((a) => a.startsWith("--peers=") ? `--peers=ringside-aggregator-a-0.ringside-aggregator-a.${NAMESPACE}.svc:9472` : a); }, "--peers names the pod itself"],
    ["--peers naming a replica of another shard", "StatefulSet", "ringside-aggregator-b", (o) => { const c = o.spec.template.spec.containers[0]; c.args = c.args.map((a) => a.startsWith("--peers=") ? `--peers=ringside-aggregator-a-1.ringside-aggregator-a.${NAMESPACE}.svc:9472` : a); }, "the other replica of shard 0, and only it"],
    ["an agent listing replica a only", "ConfigMap", "ringside-agent", (o) => { o.data["agent.flags"] = o.data["agent.flags"].replace(/^--aggregator=.*$/m, `--aggregator=ringside-aggregator-a-0.ringside-aggregator-a.${NAMESPACE}.svc:9472`); }, "but not its replica"],
    ["a PodDisruptionBudget per replica set", "PodDisruptionBudget", "ringside-aggregator", (o) => { o.spec.selector.matchLabels["ringside/replica"] = "a"; }, "one PodDisruptionBudget"],
    ["a replica set's pods in the other's headless Service", "Service", "ringside-aggregator-b", (o) => { delete o.spec.selector["ringside/replica"]; }, "does not select this set's pods only"],
    ["3 shards with the agents on --aggregator", "StatefulSet", "ringside-aggregator-a", (o) => { o.spec.replicas = 3; }, "the other shards get nothing"],
    ["--topology on an agent without --shard_map", "ConfigMap", "ringside-agent", (o) => { o.data["agent.flags"] += "--topology=/etc/ringside/agent/agent.flags\n"; }, "--topology without --shard_map"],
    ["an aggregator with --shard_map, the agents on --aggregator", "StatefulSet", "ringside-aggregator-a", (o) => { o.spec.template.spec.containers[0].args.push(`--shard_map=statefulset:1:${SHARD_TEMPLATES}`, "--shard=0"); }, "the agents do not route by a shard map"],
  ];
  // The routing checks run on the whole rendered examples/shards, one object broken (same form).
  const agentFlags = (f) => (o) => { o.data["agent.flags"] = f(o.data["agent.flags"]); };
  const aggArgs = (f) => (o) => { const c = o.spec.template.spec.containers[0]; c.args = f(c.args); };
  const shardCases = [
    ["an agent with both --aggregator and --shard_map", "ConfigMap", "ringside-agent", agentFlags((t) => `${t}--aggregator=ringside-aggregator-a-0.ringside-aggregator-a.${NAMESPACE}.svc:9472,ringside-aggregator-b-0.ringside-aggregator-b.${NAMESPACE}.svc:9472\n`), "exactly one of --aggregator and --shard_map"],
    ["an agent with neither --aggregator nor --shard_map", "ConfigMap", "ringside-agent", agentFlags((t) => t.replace(/^--shard_map=.*\n/m, "")), "exactly one of --aggregator and --shard_map"],
    ["a --shard_map of 2 shards over 3 pods each", "ConfigMap", "ringside-agent", agentFlags((t) => t.replace("--shard_map=statefulset:3:", "--shard_map=statefulset:2:")), "names 2 shards, the StatefulSets have 3"],
    ["a --shard_map template on the http port", "ConfigMap", "ringside-agent", agentFlags((t) => t.replace(/(--shard_map=.*ringside-aggregator-b\.ringside\.svc):9472/, "$1:9473")), "gives shard 0 the replicas"],
    ["a --shard_map listing replica a only", "ConfigMap", "ringside-agent", agentFlags((t) => t.replace(/^--shard_map=.*$/m, `--shard_map=statefulset:3:ringside-aggregator-a-{shard}.ringside-aggregator-a.${NAMESPACE}.svc:9472`)), "gives shard 0 the replicas"],
    ["a --shard_map template in the wrong Service", "ConfigMap", "ringside-agent", agentFlags((t) => t.replace("ringside-aggregator-b-{shard}.ringside-aggregator-b.", "ringside-aggregator-b-{shard}.ringside-aggregator-a.")), "gives shard 0 the replicas"],
    ["a --shard_map template without {shard}", "ConfigMap", "ringside-agent", agentFlags((t) => t.replace("ringside-aggregator-b-{shard}", "ringside-aggregator-b-0")), "has no {shard}"],
    ["a --shard_map shard file", "ConfigMap", "ringside-agent", agentFlags((t) => t.replace(/^--shard_map=.*$/m, "--shard_map=/etc/ringside/agent/shards.txt")), "is not statefulset:COUNT:TEMPLATE"],
    ["an agent routing without --topology", "ConfigMap", "ringside-agent", agentFlags((t) => t.replace(/^--topology=.*\n/m, "")), "without one --topology"],
    ["the agent's topology volume not mounted", "DaemonSet", "ringside-agent", (o) => { const c = o.spec.template.spec.containers[0]; c.volumeMounts = c.volumeMounts.filter((m) => m.mountPath !== "/etc/ringside/topology"); }, "is not in a mounted ConfigMap volume"],
    ["the agent's topology volume without topology.txt", "DaemonSet", "ringside-agent", (o) => { o.spec.template.spec.volumes.find((v) => v.configMap?.items).configMap.items[0].key = "topology.text"; }, "has no such key"],
    ["a topology of comments only", "ConfigMap", "ringside-aggregator", (o) => { o.data["topology.txt"] = "# gpu-node-001 leaf-01\n"; }, "has nothing but comments"],
    ["the agents' topology unlike the aggregators'", "ConfigMap", "ringside-aggregator", (o) => { o.data["topology.txt"] += "gpu-node-003 leaf-02\n"; o.data["agents-topology.txt"] = "gpu-node-001 leaf-01\n"; }, "is not the agents' topology file", (objs) => { objs.find((x) => x.kind === "DaemonSet").spec.template.spec.volumes.find((v) => v.configMap?.items).configMap.items[0].key = "agents-topology.txt"; }],
    ["ringside-aggregator-b without --shard", "StatefulSet", "ringside-aggregator-b", aggArgs((a) => a.filter((x) => !x.startsWith("--shard="))), "without exactly one --shard"],
    ["--shard=0 on every pod", "StatefulSet", "ringside-aggregator-a", aggArgs((a) => a.map((x) => (x.startsWith("--shard=") ? "--shard=0" : x))), "pod 1: --shard=0, expected 1"],
    ["SHARD from the pod name", "StatefulSet", "ringside-aggregator-b", (o) => { o.spec.template.spec.containers[0].env.find((e) => e.name === "SHARD").valueFrom.fieldRef.fieldPath = "metadata.name"; }, "pod 0: --shard=ringside-aggregator-b-0, expected 0"],
    ["SHARD from a label the pods lack", "StatefulSet", "ringside-aggregator-a", (o) => { o.spec.template.spec.containers[0].env.find((e) => e.name === "SHARD").valueFrom.fieldRef.fieldPath = "metadata.labels['statefulset.kubernetes.io/pod-index']"; }, "pod 0: --shard=, expected 0"],
    ["an aggregator --shard_map unlike the agents'", "StatefulSet", "ringside-aggregator-b", aggArgs((a) => a.map((x) => (x.startsWith("--shard_map=") ? `--shard_map=statefulset:3:${SHARD_TEMPLATES.split(",").reverse().join(",")}` : x))), "differs from the agents' --shard_map"],
    ["an aggregator without --shard_map and --shard", "StatefulSet", "ringside-aggregator-a", aggArgs((a) => a.filter((x) => !x.startsWith("--shard_map=") && !x.startsWith("--shard="))), "no --shard_map, though the agents route by one"],
    ["--shard without --shard_map", "StatefulSet", "ringside-aggregator-a", aggArgs((a) => a.filter((x) => !x.startsWith("--shard_map="))), "--shard without --shard_map"],
  ];
  for (const [what, kind, name, breakIt, phrase] of replicaCases) {
    const objs = structuredClone(base);
    const o = objs.find((x) => x.kind === kind && x.metadata.name.startsWith(name));
    const saved = failures;
    failures = [];
    if (!o) failures.push("missing");
    else {
      breakIt(o);
      checkReplicas(objs, "self-test");
    }
    const caught = failures.some((f) => f.includes(phrase));
    failures = saved;
    if (!caught) fail("self-test", `${what} was accepted: the replica check does not work`);
    else console.log(`  self-test: rejected ${what}`);
  }
  if (!sharded) fail("self-test", "examples/shards did not render: its routing checks were not self-tested");
  for (const [what, kind, name, breakIt, phrase, alsoBreak] of sharded ? shardCases : []) {
    const objs = structuredClone(sharded);
    const o = objs.find((x) => x.kind === kind && x.metadata.name.startsWith(name));
    const saved = failures;
    failures = [];
    if (!o) failures.push("missing");
    else {
      breakIt(o);
      if (alsoBreak) alsoBreak(objs);
      checkReplicas(objs, "self-test");
    }
    const caught = failures.some((f) => f.includes(phrase));
    failures = saved;
    if (!caught) fail("self-test", `${what} was accepted: the shard routing check does not work`);
    else console.log(`  self-test: rejected ${what}`);
  }
  if (sharded) {
    const objs = structuredClone(sharded);
    const cm = objs.find((x) => x.kind === "ConfigMap" && x.metadata.name.startsWith("ringside-agent"));
    cm.data["agent.flags"] = cm.data["agent.flags"].replace("--interval=1s", "--interval=2s");
    const saved = failures;
    failures = [];
    checkShardsExampleFlags(base, objs, "self-test");
    const caught = failures.some((f) => f.includes("differs from the base's"));
    failures = saved;
    if (!caught) fail("self-test", "examples/shards' agent.flags drifting from the base's was accepted");
    else console.log("  self-test: rejected examples/shards' agent.flags drifting from the base's");
  }
  if (withCerts) {
    const objs = structuredClone(withCerts);
    for (const o of objs.filter((x) => x.kind === "StatefulSet")) o.spec.replicas = 2;
    const saved = failures;
    failures = [];
    checkAggregatorCertificate(objs, "self-test");
    const caught = failures.some((f) => f.includes("dnsNames lack ringside-aggregator-a-1."));
    failures = saved;
    if (!caught) fail("self-test", "an aggregator certificate without shard 1's pods was accepted");
    else console.log("  self-test: rejected an aggregator certificate without shard 1's pods");
  }
  if (withCerts) {
    for (const [what, breakIt, phrase] of [
      ["a PodMonitor with insecureSkipVerify", (objs) => { objs.find((o) => o.kind === "PodMonitor").spec.podMetricsEndpoints[0].tlsConfig.insecureSkipVerify = true; }, "insecureSkipVerify"],
      ["a ServiceMonitor scraping plain http", (objs) => { delete objs.find((o) => o.kind === "ServiceMonitor").spec.endpoints[0].scheme; }, "does not scrape over https"],
      ["an agent without --web-config-file", (objs) => { const c = objs.find((o) => o.kind === "DaemonSet").spec.template.spec.containers[0]; c.args = c.args.filter((a) => !a.startsWith("--web-config-file")); }, "no --web-config-file"],
    ]) {
      const objs = structuredClone(withCerts);
      breakIt(objs);
      const saved = failures;
      failures = [];
      checkTarget("examples/all-components", objs);
      const caught = failures.some((f) => f.includes(phrase));
      failures = saved;
      if (!caught) fail("self-test", `${what} was accepted`);
      else console.log(`  self-test: rejected ${what}`);
    }
  }
  if (monitored) {
    const sm0 = monitored.find((o) => o.kind === "ServiceMonitor");
    for (const [what, breakIt, phrase] of [
      ["a ServiceMonitor without the replica relabeling", (sm) => { sm.spec.endpoints[0].relabelings = sm.spec.endpoints[0].relabelings.filter((r) => r.targetLabel !== "replica"); }, "gets replica=\"undefined\""],
      ["a ServiceMonitor that keeps the pod label", (sm) => { sm.spec.endpoints[0].relabelings = sm.spec.endpoints[0].relabelings.filter((r) => r.action !== "labeldrop"); }, "differ beyond replica"],
      ["a ServiceMonitor without jobLabel", (sm) => { delete sm.spec.jobLabel; }, "is scraped as job="],
    ]) {
      const sm = structuredClone(sm0);
      breakIt(sm);
      const saved = failures;
      failures = [];
      checkServiceMonitor(sm, monitored, "self-test");
      const caught = failures.some((f) => f.includes(phrase));
      failures = saved;
      if (!caught) fail("self-test", `${what} was accepted: the ServiceMonitor check does not work`);
      else console.log(`  self-test: rejected ${what}`);
    }
  }
  {
    const source = YAML.parse(readFileSync(join(ROOT, "deploy/prometheus/rules/ringside.rules.yml"), "utf8"));
    for (const [what, breakIt] of [
      ["RingsideIncidentOpen without max without (replica)", (src) => { src.groups.flatMap((g) => g.rules).find((r) => r.alert === "RingsideIncidentOpen").expr = "ringside_incidents_open > 0"; }],
      ["an alert labelled replica", (src) => { src.groups.flatMap((g) => g.rules).find((r) => r.alert).labels.replica = "a"; }],
    ]) {
      const src = structuredClone(source);
      breakIt(src);
      const saved = failures;
      failures = [];
      checkRulesAcrossReplicas(src, "self-test");
      const caught = failures.length > 0;
      failures = saved;
      if (!caught) fail("self-test", `${what} was accepted: the rules check does not work`);
      else console.log(`  self-test: rejected ${what}`);
    }
  }
  for (const [what, original, breakIt, kind] of cases) {
    const o = structuredClone(original);
    if (!o.metadata.namespace) o.metadata.namespace = NAMESPACE;
    breakIt(o);
    const saved = failures;
    failures = [];
    if (kind === "schema") await checkSchema(o, "self-test");
    else checkWorkloadPolicy(o, "self-test");
    const caught = failures.length > 0;
    failures = saved;
    if (!caught) fail("self-test", `${what} was accepted: the ${kind} check does not work`);
    else console.log(`  self-test: rejected ${what}`);
  }
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const targets = ["base", ...readdirSync(join(K8S, "overlays")).sort().map((d) => `overlays/${d}`), "examples/all-components", "examples/shards"];
  const rendered = {};
  for (const t of targets) {
    try {
      rendered[t] = parseAll(render(KUBECTL, join(K8S, t)), t);
    } catch (e) {
      fail(t, e.message);
      continue;
    }
    console.log(`rendered ${t}: ${rendered[t].length} objects (${[...new Set(rendered[t].map((o) => o.kind))].join(", ")})`);
  }
  for (const t of Object.keys(rendered)) {
    for (const o of rendered[t]) await checkSchema(o, t);
    checkTarget(t, rendered[t]);
  }
  if (rendered.base && rendered["examples/shards"]) checkShardsExampleFlags(rendered.base, rendered["examples/shards"], "examples/shards");
  const training = parseAll(readFileSync(join(K8S, "examples/training-job.yaml"), "utf8"), "examples/training-job.yaml");
  for (const o of training) {
    await checkSchema(o, "examples/training-job.yaml");
    checkTrainingExample(o, "examples/training-job.yaml");
  }
  checkPrometheusRule();
  for (const b of ["agent-bin", "aggregator-bin"]) {
    if (args[b] && !existsSync(args[b])) {
      console.log(`  ${args[b]} is not built: its flag file is checked by name only`);
      delete args[b];
    }
  }
  checkFlagfilesWithPrograms(rendered);
  await checkShardingWithPrograms(rendered);
  if (rendered.base) await selfTest(rendered.base, rendered["overlays/prometheus-operator"], rendered["examples/shards"], rendered["examples/all-components"]);
  if (args["compat-kubectl"] && rendered.base) {
    // kustomize v2 hashes generated ConfigMap names differently: compare without the suffix.
    const norm = (objs) => JSON.stringify(objs.map((o) => JSON.parse(JSON.stringify(o).replace(/(ringside-(agent|aggregator))-[a-z0-9]{10}"/g, '$1"'))).sort((a, b) => `${a.kind}/${a.metadata.name}`.localeCompare(`${b.kind}/${b.metadata.name}`)));
    try {
      const old = parseAll(render(args["compat-kubectl"], join(K8S, "base")), "base (compat)");
      if (norm(old) !== norm(rendered.base)) fail("base", `${args["compat-kubectl"]} kustomize renders different objects than ${KUBECTL}`);
      else console.log(`rendered base with ${args["compat-kubectl"]}: the same ${old.length} objects`);
    } catch (e) {
      fail("base", e.message);
    }
  }
  if (failures.length) {
    console.error(`\n${failures.length} problem(s):`);
    for (const f of failures) console.error(`  FAIL ${f}`);
    process.exit(1);
  }
  console.log(`\nOK: ${Object.keys(rendered).length} kustomizations and the training example are valid and within policy`);
}

await main();
