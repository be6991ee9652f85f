"""Stand-in artifacts for the lab: small, honest substitutes for what cannot be fetched here.

k3s, the GitLab omnibus package, GitLab Runner and the GPUaaS node agent are not reachable from
this machine. The roles fetch them from a configurable URL and verify a sha256; in the lab those
URLs point at the files built here (served by the lab's own HTTP server), with their real
checksums. Each stand-in keeps the *contract* the roles rely on — the same CLI verbs, unit names,
config paths and a health endpoint — and says loudly that it is a stand-in. Production points the
same variables at the real artifacts (docs/host-roles.md).
"""

from __future__ import annotations

import hashlib
import subprocess
import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict

# Shared by every stand-in: a tiny JSON/text HTTP server (stdlib only: hosts have python3).
_PRELUDE = '''#!/usr/bin/python3
# LAB STAND-IN (gpuaas-infra lab/standins.py): NOT the real {what}.
import http.server, json, os, pathlib, sys, urllib.request, urllib.error

def serve(addr, port, routes):
    class H(http.server.BaseHTTPRequestHandler):
        def _reply(self, code, body):
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(code); self.send_header("Content-Length", str(len(data)))
            self.end_headers(); self.wfile.write(data)
        def do_GET(self):
            code, body = routes("GET", self.path, None); self._reply(code, body)
        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            code, body = routes("POST", self.path, json.loads(self.rfile.read(n) or b"{{}}"))
            self._reply(code, body)
        def log_message(self, *a):
            pass
    http.server.ThreadingHTTPServer((addr, port), H).serve_forever()
'''

_K3S = '''
import hashlib, time
STANDIN = pathlib.Path("/var/lib/rancher/k3s/standin")
STATE = STANDIN / "namespaces"
MEMBERS = STANDIN / "members"
API = "http://127.0.0.1:6443"
JOIN_DEADLINE_S = 180

def token_of(path):
    return pathlib.Path(path).read_text().strip()

def routes_for(token):
    def routes(method, path, body):
        if path == "/readyz":
            return 200, b"ok"
        if method == "POST" and path == "/v1-k3s/join":
            # a real k3s server admits a joining server that presents the cluster token: so does this one
            if not token or body.get("token") != token:
                (STANDIN / "refused").mkdir(parents=True, exist_ok=True)
                (STANDIN / "refused" / str(body.get("hostname"))).write_text(json.dumps(body.get("args")))
                return 401, {"reason": "Unauthorized", "message": "join token refused"}
            MEMBERS.mkdir(parents=True, exist_ok=True)
            (MEMBERS / str(body["hostname"])).write_text(json.dumps(body.get("args")))
            return 200, {"joined": body["hostname"]}
        if method == "GET" and path.startswith("/api/v1/namespaces/"):
            name = path.rsplit("/", 1)[1]
            return (200, {"metadata": {"name": name}}) if (STATE / name).exists() else (404, {"reason": "NotFound"})
        if method == "POST" and path == "/api/v1/namespaces":
            name = body["metadata"]["name"]
            if (STATE / name).exists():
                return 409, {"reason": "AlreadyExists"}
            (STATE / name).touch()
            return 201, {"metadata": {"name": name}}
        return 404, {"reason": "NotFound"}
    return routes

def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(API + path, data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        sys.exit("The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?")

def server(argv):
    opts, i = {}, 1
    while i < len(argv):
        if argv[i] in ("--server", "--token-file"):
            opts[argv[i]] = argv[i + 1]; i += 2
        else:
            opts[argv[i]] = True; i += 1
    if "--token-file" not in opts:
        sys.exit("k3s stand-in: server needs --token-file (the cluster token)")
    token = token_of(opts["--token-file"])
    STATE.mkdir(parents=True, exist_ok=True)
    record = {"argv": argv, "cluster_init": "--cluster-init" in opts, "server": opts.get("--server"),
              "token_sha256": hashlib.sha256(token.encode()).hexdigest()}
    (STANDIN / "server-args.json").write_text(json.dumps(record))
    if opts.get("--server"):
        url = opts["--server"]
        if not (url.startswith("https://") and url.endswith(":6443")):
            sys.exit("k3s stand-in: --server must be https://<first server>:6443, got %r" % url)
        # the stand-in speaks plain HTTP: what is checked is who joins whom with which token
        body = json.dumps({"hostname": os.uname().nodename, "token": token, "args": argv}).encode()
        deadline, answer = time.monotonic() + JOIN_DEADLINE_S, None
        while time.monotonic() < deadline:
            req = urllib.request.Request("http://" + url[len("https://"):] + "/v1-k3s/join", data=body, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=5) as r:
                    answer = r.status
                    break
            except urllib.error.HTTPError as e:
                answer = e.code
                if e.code == 401:
                    sys.exit("k3s stand-in: the server at %s refused the join token" % url)
            except OSError:
                pass
            time.sleep(2)
        if answer != 200:
            sys.exit("k3s stand-in: could not join %s (last answer %r)" % (url, answer))
        (STANDIN / "joined.json").write_text(json.dumps({"server": url, "hostname": os.uname().nodename}))
    for ns in ("default", "kube-system", "kube-public"):
        (STATE / ns).touch()
    serve("0.0.0.0", 6443, routes_for(token))

def main(argv):
    if argv[:1] == ["--version"]:
        print("k3s version v0.0.0-lab-standin (NOT k3s)"); return 0
    if argv[:1] == ["server"]:
        server(argv)
    if argv[:3] == ["kubectl", "get", "namespace"] and len(argv) == 4:
        if call("GET", "/api/v1/namespaces/" + argv[3]) == 200:
            print(argv[3] + "   Active"); return 0
        print('Error from server (NotFound): namespaces "%s" not found' % argv[3], file=sys.stderr); return 1
    if argv[:3] == ["kubectl", "create", "namespace"] and len(argv) == 4:
        code = call("POST", "/api/v1/namespaces", {"metadata": {"name": argv[3]}})
        if code == 201:
            print("namespace/%s created" % argv[3]); return 0
        print('Error from server (AlreadyExists): namespaces "%s" already exists' % argv[3], file=sys.stderr)
        return 1
    print("k3s stand-in: unsupported arguments %r" % argv, file=sys.stderr); return 2

sys.exit(main(sys.argv[1:]))
'''

_GITLAB_CTL = '''
def main(argv):
    if argv[:1] == ["reconfigure"]:
        rb = pathlib.Path("/etc/gitlab/gitlab.rb").read_text()
        url = next((l.split("'")[1] for l in rb.splitlines() if l.startswith("external_url")), "")
        out = pathlib.Path("/var/opt/gitlab"); out.mkdir(parents=True, exist_ok=True)
        (out / "standin.json").write_text(json.dumps({"external_url": url}))
        print("gitlab Reconfigured! (lab stand-in)"); return 0
    if argv[:1] == ["status"]:
        print("run: gitlab-standin"); return 0
    print("gitlab-ctl stand-in: unsupported %r" % argv, file=sys.stderr); return 2

sys.exit(main(sys.argv[1:]))
'''

_GITLAB_SERVER = '''
def routes(method, path, body):
    if path in ("/-/health", "/-/readiness"):
        return 200, b"GitLab OK (lab stand-in)"
    return 404, {"message": "404 Not Found"}

serve("0.0.0.0", 80, routes)
'''

_RUNNER = '''
import tomllib
CONF = pathlib.Path("/etc/gitlab-runner/config.toml")

def runners():
    conf = tomllib.loads(CONF.read_text()) if CONF.exists() else {}
    return [r["name"] for r in conf.get("runners", [])]

def main(argv):
    if argv[:1] == ["--version"]:
        print("Version: 0.0.0-lab-standin (NOT gitlab-runner)"); return 0
    if argv[:1] == ["list"]:
        for n in runners():
            print(n)
        return 0
    if argv[:1] == ["run"]:
        serve("127.0.0.1", 9252, lambda m, p, b: (200, {"runners": runners()}))
    print("gitlab-runner stand-in: unsupported %r" % argv, file=sys.stderr); return 2

sys.exit(main(sys.argv[1:]))
'''

_NODE_AGENT = '''
def main(argv):
    if argv[:1] == ["run"] and len(argv) == 3 and argv[1] == "--config":
        conf = json.loads(pathlib.Path(argv[2]).read_text())
        host, port = conf["listen"].rsplit(":", 1)
        health = {"status": "ok", "hostname": conf["hostname"], "environment": conf["environment"]}
        serve(host, int(port), lambda m, p, b: (200, health) if p == "/healthz" else (404, {}))
    print("usage: gpuaas-node-agent run --config FILE", file=sys.stderr); return 2

sys.exit(main(sys.argv[1:]))
'''

_UNITS = {
    "gitlab-runsvdir.service": "[Unit]\nDescription=GitLab (lab stand-in)\n[Service]\n"
    "ExecStart=/opt/gitlab/embedded/bin/gitlab-standin-server\nRestart=always\n[Install]\nWantedBy=multi-user.target\n",
    "gitlab-runner.service": "[Unit]\nDescription=GitLab Runner (lab stand-in)\n[Service]\n"
    "ExecStart=/usr/bin/gitlab-runner run\nRestart=always\n[Install]\nWantedBy=multi-user.target\n",
}


class Artifact(BaseModel):
    """One built stand-in: the file name under the lab's web root and its sha256."""

    model_config = ConfigDict(frozen=True)
    name: str
    sha256: str


def _script(what: str, body: str) -> str:
    return _PRELUDE.format(what=what) + body


def _write_exec(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def _build_deb(package: str, files: dict[str, tuple[str, int]], out: Path) -> None:
    """A minimal binary package (dpkg-deb), so the roles' `apt: deb=` path is the real one."""
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        root.chmod(0o755)
        for rel, (text, mode) in files.items():
            p = root / rel.lstrip("/")
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
            p.chmod(mode)
        control = root / "DEBIAN" / "control"
        control.parent.mkdir(parents=True, exist_ok=True)
        control.write_text(
            f"Package: {package}\nVersion: 0.0.0-lab-standin\nArchitecture: all\nMaintainer: gpuaas-infra lab\n"
            f"Depends: python3\nDescription: LAB STAND-IN for {package} (not the real package)\n"
        )
        # --root-owner-group + a fixed mtime keep the .deb byte-identical between builds.
        env = {"SOURCE_DATE_EPOCH": "1700000000", "PATH": "/usr/bin:/bin"}
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(root), str(out)],
                       check=True, capture_output=True, env=env)


def build_standins(out_dir: Path) -> dict[str, Artifact]:
    """Build every stand-in into `out_dir`; keys are the `gpuaas_artifacts` names the roles read."""
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_exec(out_dir / "k3s", _script("k3s", _K3S))
    _write_exec(out_dir / "gpuaas-node-agent", _script("GPUaaS node agent", _NODE_AGENT))
    _build_deb("gitlab-ce", {
        "/usr/bin/gitlab-ctl": (_script("gitlab-ctl", _GITLAB_CTL), 0o755),
        "/opt/gitlab/embedded/bin/gitlab-standin-server": (_script("GitLab", _GITLAB_SERVER), 0o755),
        "/lib/systemd/system/gitlab-runsvdir.service": (_UNITS["gitlab-runsvdir.service"], 0o644),
    }, out_dir / "gitlab-ce.deb")
    _build_deb("gitlab-runner", {
        "/usr/bin/gitlab-runner": (_script("gitlab-runner", _RUNNER), 0o755),
        "/lib/systemd/system/gitlab-runner.service": (_UNITS["gitlab-runner.service"], 0o644),
    }, out_dir / "gitlab-runner.deb")
    return build_standins_index(out_dir)


_NAMES = {"k3s": "k3s", "gitlab": "gitlab-ce.deb", "gitlab_runner": "gitlab-runner.deb",
          "node_agent": "gpuaas-node-agent"}


def build_standins_index(out_dir: Path) -> dict[str, Artifact]:
    """The artifacts already built in `out_dir`, with their sha256 (what the roles verify)."""
    return {key: Artifact(name=n, sha256=hashlib.sha256((out_dir / n).read_bytes()).hexdigest())
            for key, n in _NAMES.items()}
