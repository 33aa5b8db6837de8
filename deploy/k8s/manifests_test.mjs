// Renders the Kustomize base, its components and the example overlay with the real kubectl
// (its built-in kustomize), validates every object against the Kubernetes API schemas that the
// kubernetes-models packages ship (generated from the published OpenAPI spec), and checks
// that the settings an overlay makes land where the daemon reads them.
//
// Needs the packages of deploy/k8s/check and a kubectl with kustomize v5, which
// deploy/k8s/check/install.sh (run by tools/setup.sh) puts in one directory
// (GPUPROF_K8S_CHECK_MODULES overrides its node_modules, GPUPROF_KUBECTL the kubectl).
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import {
  cpSync, existsSync, mkdtempSync, mkdirSync, readFileSync, readdirSync, writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { pathToFileURL } from "node:url";

const modules =
  process.env.GPUPROF_K8S_CHECK_MODULES || "/usr/local/lib/gpuprof-k8s-check/node_modules";
const runfiles = join(process.env.TEST_SRCDIR || ".", process.env.TEST_WORKSPACE || "");
const gpuprofd = join(runfiles, "daemon/gpuprofd");
const YAML = createRequire(join(modules, "noop.js"))("yaml");

// The kubectl install.sh unpacks beside the packages (a pinned version), else one on PATH.
const pinnedKubectl = join(dirname(modules), "bin/kubectl");
const kubectl =
  process.env.GPUPROF_KUBECTL || (existsSync(pinnedKubectl) ? pinnedKubectl : "kubectl");
const kubectlVersion =
  spawnSync(kubectl, ["version", "--client", "-o", "json"], { encoding: "utf8" });
const kustomizeVersion = kubectlVersion.status === 0
  ? JSON.parse(kubectlVersion.stdout).kustomizeVersion ?? "" : "";
// install.sh brings kubectl on x86-64 only; elsewhere, without one, the rendering checks skip
// (saying why) rather than fail. On x86-64 a missing kubectl is a setup error and fails.
const cannotRender = !/^v[5-9]\./.test(kustomizeVersion) && process.arch !== "x64" &&
  `no kubectl with kustomize v5 (${kubectl}: ${kubectlVersion.error?.message ??
    (kustomizeVersion || kubectlVersion.stderr)}); deploy/k8s/check/install.sh brings one ` +
  `on x86-64 only: put one on PATH to run the rendering checks on ${process.arch}`;
const rendering = { skip: cannotRender };

// kustomize refuses files reached through symlinks out of a kustomization's root, and Bazel's
// runfiles are symlinks: render from a plain copy.
const tree = mkdtempSync(join(process.env.TEST_TMPDIR || tmpdir(), "k8s-"));
for (const dir of ["deploy/k8s", "dashboards"]) {
  cpSync(join(runfiles, dir), join(tree, dir), { recursive: true, dereference: true });
}

function render(dir) {
  const out = execFileSync(kubectl, ["kustomize", join(tree, dir)], { encoding: "utf8" });
  return YAML.parseAllDocuments(out).map((doc) => {
    assert.equal(doc.errors.length, 0, `${dir}: ${doc.errors.join("; ")}`);
    return doc.toJS();
  });
}

// The model class of an object's apiVersion and kind, from the schema packages.
async function modelOf(object) {
  const { apiVersion, kind } = object;
  let path;
  if (apiVersion === "monitoring.coreos.com/v1") {
    path = `@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/${kind}.js`;
  } else if (/^[a-z.0-9]*\/?v[0-9a-z]+$/.test(apiVersion)) {
    path = `kubernetes-models/${apiVersion}/${kind}.js`;
  } else {
    assert.fail(`no schema for apiVersion ${apiVersion}`);
  }
  const module = await import(pathToFileURL(join(modules, path)).href).catch(() => {
    assert.fail(`no schema for ${apiVersion} ${kind} (${path})`);
  });
  return module[kind];
}

async function validateAll(objects, where) {
  for (const object of objects) {
    const Model = await modelOf(object);
    try {
      new Model(object).validate();
    } catch (error) {
      assert.fail(`${where}: ${object.kind}/${object.metadata?.name}: ${error.message}`);
    }
  }
}

const find = (objects, kind, name) => {
  const found = objects.filter((o) => o.kind === kind && (!name || o.metadata.name === name));
  assert.equal(found.length, 1, `one ${kind} ${name ?? ""}, found ${found.length}`);
  return found[0];
};
const daemonContainer = (objects) =>
  find(objects, "DaemonSet", "gpuprofd").spec.template.spec.containers.find(
    (c) => c.name === "gpuprofd");
const flagsOf = (container) =>
  Object.fromEntries(container.args.map((arg) => {
    const match = /^--([a-z_]+)=(.*)$/.exec(arg);
    assert.ok(match, `argument ${arg} is not --flag=value`);
    return [match[1], match[2]];
  }));
const volumeOf = (objects, name) =>
  find(objects, "DaemonSet", "gpuprofd").spec.template.spec.volumes.find((v) => v.name === name);

// The mount whose path holds `file`, and the volume behind it.
function volumeHolding(objects, file) {
  const container = daemonContainer(objects);
  const mount = container.volumeMounts.find((m) => file.startsWith(m.mountPath + "/"));
  assert.ok(mount, `${file} is on no mounted volume`);
  assert.equal(mount.subPath, undefined, `${file}: subPath mounts never see updates`);
  return volumeOf(objects, mount.name);
}

test("kubectl has kustomize v5", rendering, () => {
  assert.equal(kubectlVersion.error, undefined,
               `${kubectl}: run tools/setup.sh (deploy/k8s/check/install.sh) to install kubectl`);
  assert.match(kustomizeVersion, /^v[5-9]\./,
               `${kubectl}: the manifests use kustomize v5 syntax (components, labels)`);
});

test("the validator rejects what the API server would", async () => {
  const Model = await modelOf({ apiVersion: "apps/v1", kind: "DaemonSet" });
  const broken = new Model({
    metadata: { name: "x" },
    spec: { selector: {}, template: { spec: { containers: [{ image: "no-name" }] } } },
  });
  assert.throws(() => broken.validate(), /name/);
});

test("the base renders and every object passes the API schema", rendering, async () => {
  const objects = render("deploy/k8s/base");
  assert.deepEqual(objects.map((o) => o.kind).sort(),
                   ["ConfigMap", "ConfigMap", "DaemonSet", "Namespace", "Service",
                    "ServiceMonitor"]);
  await validateAll(objects, "base");
  for (const object of objects.filter((o) => o.kind !== "Namespace")) {
    assert.equal(object.metadata.namespace, "gpuprof", `${object.kind} namespace`);
  }
});

test("the base DaemonSet runs gpuprofd as the daemon expects", rendering, () => {
  const objects = render("deploy/k8s/base");
  const pod = find(objects, "DaemonSet", "gpuprofd").spec.template;
  const container = daemonContainer(objects);
  const flags = flagsOf(container);

  // GPU nodes, the NVIDIA runtime, every GPU without a device-plugin claim.
  assert.deepEqual(pod.spec.nodeSelector, { "nvidia.com/gpu.present": "true" });
  assert.ok(pod.spec.tolerations.some((t) => t.key === "nvidia.com/gpu"));
  assert.equal(pod.spec.runtimeClassName, "nvidia");
  const env = Object.fromEntries(container.env.map((e) => [e.name, e.value]));
  assert.equal(env.NVIDIA_VISIBLE_DEVICES, "all");
  assert.match(env.NVIDIA_DRIVER_CAPABILITIES, /compute/);
  assert.match(env.NVIDIA_DRIVER_CAPABILITIES, /utility/, "NVML telemetry needs utility");

  // Narrow privileges: nothing added, everything dropped, not privileged.
  const security = container.securityContext;
  assert.notEqual(security.privileged, true);
  assert.equal(security.allowPrivilegeEscalation, false);
  assert.deepEqual(security.capabilities, { drop: ["ALL"] });
  assert.equal(security.readOnlyRootFilesystem, true);

  // State on the node, where --state_dir points.
  const stateMount = container.volumeMounts.find((m) => m.name === "state");
  assert.equal(stateMount.mountPath, flags.state_dir);
  assert.equal(volumeOf(objects, "state").hostPath.path, "/var/lib/gpuprof");
  assert.ok(flags.listen.split(",").includes(`unix:${flags.state_dir}/gpuprofd.sock`));
  const jit = container.volumeMounts.find((m) => m.name === "jit-cache");
  assert.ok(env.GPUPROF_JIT_CACHE_DIR.startsWith(jit.mountPath + "/"));
  assert.ok(env.CUDA_CACHE_PATH.startsWith(jit.mountPath + "/"), "read-only root: cache on a volume");
  // NCCL between rank workers needs more shared memory than the runtime's default.
  const shm = container.volumeMounts.find((m) => m.mountPath === "/dev/shm");
  assert.equal(volumeOf(objects, shm.name).emptyDir.medium, "Memory");

  // Probes: native gRPC probes on the plaintext health-only port.
  const healthPort = Number(flags.health_listen.split(":").pop());
  for (const probe of ["startupProbe", "livenessProbe", "readinessProbe"]) {
    assert.equal(container[probe].grpc.port, healthPort, probe);
  }
  assert.ok(container.ports.some((p) => p.name === "health" && p.containerPort === healthPort));

  // The kubelet's SIGKILL must come after the daemon's own bounded shutdown.
  const shutdownSeconds = Number(/^(\d+)s$/.exec(flags.shutdown_timeout)[1]);
  assert.ok(pod.spec.terminationGracePeriodSeconds > shutdownSeconds + 5);

  // TLS material from Secrets, the policy from the ConfigMap, each watched for changes.
  assert.equal(volumeHolding(objects, flags.tls_cert).secret.secretName, "gpuprofd-tls");
  assert.equal(volumeHolding(objects, flags.tls_key).secret.secretName, "gpuprofd-tls");
  assert.equal(volumeHolding(objects, flags.tls_client_ca).secret.secretName,
               "gpuprof-client-ca");
  const policy = volumeHolding(objects, flags.policy).configMap.name;
  assert.equal(policy, "gpuprof-policy", "a fixed name: a hashed one rolls every daemon");
  find(objects, "ConfigMap", policy);
  const watched = flags.reload_when_changed.split(",");
  for (const file of [flags.policy, flags.tls_cert, flags.tls_client_ca]) {
    assert.ok(watched.includes(file), `${file} is not watched`);
  }

  // Prometheus: annotations and the ServiceMonitor name the metrics port.
  const metricsPort = Number(flags.metrics_listen.split(":").pop());
  assert.equal(pod.metadata.annotations["prometheus.io/scrape"], "true");
  assert.equal(Number(pod.metadata.annotations["prometheus.io/port"]), metricsPort);
  const service = find(objects, "Service", "gpuprofd");
  assert.equal(service.spec.clusterIP, "None");
  for (const [key, value] of Object.entries(service.spec.selector)) {
    assert.equal(pod.metadata.labels[key], value, "the Service selects the pods");
  }
  const monitor = find(objects, "ServiceMonitor", "gpuprofd");
  assert.ok(service.spec.ports.some((p) => p.name === monitor.spec.endpoints[0].port &&
                                           p.port === metricsPort));
  assert.ok(monitor.spec.endpoints[0].relabelings.some((r) => r.targetLabel === "node"),
            "series carry the node for the dashboards' $node variable");
});

test("every flag the DaemonSet passes is one gpuprofd has", rendering, () => {
  // absl's --helpfull prints the flags and exits with status 1.
  const help = spawnSync(gpuprofd, ["--helpfull"], { encoding: "utf8" }).stdout;
  const known = new Set([...help.matchAll(/^\s+--([a-z_0-9]+) /gm)].map((m) => m[1]));
  assert.ok(known.has("state_dir"), "gpuprofd --helpfull lists its flags");
  for (const flag of Object.keys(flagsOf(daemonContainer(render("deploy/k8s/base"))))) {
    assert.ok(known.has(flag), `gpuprofd has no --${flag}`);
  }
});

test("the dashboards ConfigMap carries every dashboard for Grafana's sidecar", rendering, () => {
  const objects = render("deploy/k8s/base");
  const dashboards = find(objects, "ConfigMap", "gpuprof-dashboards");
  assert.equal(dashboards.metadata.labels.grafana_dashboard, "1");
  const files = readdirSync(join(tree, "dashboards")).filter((f) => f.endsWith(".json")).sort();
  assert.deepEqual(Object.keys(dashboards.data).sort(), files);
  for (const file of files) {
    assert.equal(dashboards.data[file], readFileSync(join(tree, "dashboards", file), "utf8"));
    const json = JSON.parse(dashboards.data[file]);
    assert.ok(json.templating.list.some((v) => v.name === "node"), `${file} has $node`);
  }
});

test("the example overlay's values land where the daemon reads them", rendering, async () => {
  const objects = render("deploy/k8s/overlays/example");
  await validateAll(objects, "overlays/example");
  for (const object of objects) {
    if (object.kind === "Namespace") assert.equal(object.metadata.name, "profiling");
    else assert.equal(object.metadata.namespace, "profiling", `${object.kind} namespace`);
  }
  const pod = find(objects, "DaemonSet", "gpuprofd").spec.template.spec;
  const container = daemonContainer(objects);
  const flags = flagsOf(container);
  assert.equal(container.image, "registry.lab.internal/gpuprof/gpuprofd:2026.11.1");
  assert.deepEqual(pod.nodeSelector, { "lab.internal/gpu-pool": "profiling" });
  assert.deepEqual(pod.tolerations.map((t) => t.key), ["lab.internal/dedicated"]);
  assert.deepEqual(volumeOf(objects, "state").hostPath,
                   { path: "/data/gpuprof/state", type: "DirectoryOrCreate" });
  assert.equal(volumeOf(objects, "jit-cache").hostPath.path, "/data/gpuprof/jit");
  assert.equal(volumeHolding(objects, flags.tls_cert).secret.secretName,
               "profiling-gpuprofd-server-tls");
  assert.equal(volumeHolding(objects, flags.tls_client_ca).secret.secretName,
               "profiling-users-ca");
  // The secret's items (file names and the key's mode) survive the rename.
  assert.deepEqual(volumeHolding(objects, flags.tls_key).secret.items.map((i) => i.path),
                   ["tls.crt", "tls.key"]);
  assert.deepEqual(container.securityContext.capabilities, { add: ["PERFMON"], drop: ["ALL"] });
  const policy = find(objects, "ConfigMap", "gpuprof-policy");
  assert.equal(policy.data["policy.textproto"],
               readFileSync(join(tree, "deploy/k8s/overlays/example/policy.textproto"), "utf8"));
});

test("the SYS_ADMIN component passes the API's rules for that capability", rendering,
     async () => {
  const dir = "deploy/k8s/overlays/sys-admin-check";
  mkdirSync(join(tree, dir));
  writeFileSync(join(tree, dir, "kustomization.yaml"),
                "resources: [../../base]\ncomponents: [../../components/perf-counters-sys-admin]\n");
  const objects = render(dir);
  await validateAll(objects, dir);
  const security = daemonContainer(objects).securityContext;
  assert.deepEqual(security.capabilities.add, ["SYS_ADMIN"]);
  // The API server refuses SYS_ADMIN with allowPrivilegeEscalation: false.
  assert.equal(security.allowPrivilegeEscalation, true);
  assert.notEqual(security.privileged, true);
});
