"""A small Confluent schema registry for the tests: the REST endpoints that confluent-kafka's
serializers and sluice call, nothing more. No schema-registry server can be installed from the
registries this project's machines reach (Karapace is not on PyPI), so the suite runs this one.

  registry.py --port PORT --state FILE [--user USER --password PASSWORD]

- POST /subjects/{subject}/versions  {"schema", "schemaType"?, "references"?} -> {"id"}: the
  same schema text and type get the same id under every subject (as Confluent's do); a new one
  gets the next id. Compatibility is left to the producer (every version is accepted).
- POST /subjects/{subject}                      -> the version of that schema under the subject
- GET  /schemas/ids/{id}                        -> {"schema", "schemaType"?} (no type: Avro)
- GET  /subjects/{subject}/versions/latest|N    -> {"subject", "id", "version", "schema"}
- GET  /subjects, /subjects/{subject}/versions, /config, /config/{subject}
Unknown ids and subjects answer 404 with Confluent's error codes (40403, 40401).

The schemas are kept in FILE (JSON), so a registry stopped and started again on the same port
answers as before (the tests take it down to check that sluice waits for it). With --user and
--password every request needs that basic auth (401 otherwise)."""
import argparse
import base64
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

LOCK = threading.Lock()


class State:
    def __init__(self, path: Path):
        self.path = path
        data = json.loads(path.read_text()) if path.exists() else {"schemas": [], "subjects": {}}
        # schemas: [{"schema", "schemaType", "references"}], id = index + 1
        self.schemas = data["schemas"]
        # subjects: name -> [id of version 1, id of version 2, ...]
        self.subjects = data["subjects"]

    def save(self):
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"schemas": self.schemas, "subjects": self.subjects}))
        tmp.replace(self.path)

    def register(self, subject: str, body: dict) -> int:
        entry = {"schema": body["schema"], "schemaType": body.get("schemaType", "AVRO"),
                 "references": body.get("references", [])}
        try:
            sid = self.schemas.index(entry) + 1
        except ValueError:
            self.schemas.append(entry)
            sid = len(self.schemas)
        versions = self.subjects.setdefault(subject, [])
        if sid not in versions:
            versions.append(sid)
        self.save()
        return sid

    def answer(self, sid: int, subject: str | None = None, version: int | None = None) -> dict:
        entry = self.schemas[sid - 1]
        out = {"id": sid, "schema": entry["schema"]}
        if entry["schemaType"] != "AVRO":
            out["schemaType"] = entry["schemaType"]
        if entry["references"]:
            out["references"] = entry["references"]
        if subject is not None:
            out.update(subject=subject, version=version)
        return out


def handler(state: State, auth: str | None):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def send(self, code: int, body):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def authorized(self) -> bool:
            if auth is None or self.headers.get("Authorization") == auth:
                return True
            self.send(401, {"error_code": 401, "message": "Unauthorized"})
            return False

        def do_GET(self):
            if not self.authorized():
                return
            path = self.path.split("?")[0].rstrip("/")
            with LOCK:
                if m := re.fullmatch(r"/schemas/ids/(\d+)", path):
                    sid = int(m[1])
                    if 1 <= sid <= len(state.schemas):
                        out = state.answer(sid)
                        del out["id"]
                        return self.send(200, out)
                    return self.send(404, {"error_code": 40403, "message": "Schema not found"})
                if path == "/subjects":
                    return self.send(200, sorted(state.subjects))
                if m := re.fullmatch(r"/subjects/([^/]+)/versions", path):
                    if m[1] not in state.subjects:
                        return self.send(404, {"error_code": 40401, "message": "Subject not found"})
                    return self.send(200, list(range(1, len(state.subjects[m[1]]) + 1)))
                if m := re.fullmatch(r"/subjects/([^/]+)/versions/(latest|\d+)", path):
                    versions = state.subjects.get(m[1])
                    if not versions:
                        return self.send(404, {"error_code": 40401, "message": "Subject not found"})
                    v = len(versions) if m[2] == "latest" else int(m[2])
                    if not 1 <= v <= len(versions):
                        return self.send(404, {"error_code": 40402, "message": "Version not found"})
                    return self.send(200, state.answer(versions[v - 1], m[1], v))
                if re.fullmatch(r"/config(/[^/]+)?", path):
                    return self.send(200, {"compatibilityLevel": "NONE"})
            self.send(404, {"error_code": 404, "message": "Not found"})

        def do_POST(self):
            if not self.authorized():
                return
            path = self.path.split("?")[0].rstrip("/")
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            with LOCK:
                if m := re.fullmatch(r"/subjects/([^/]+)/versions", path):
                    return self.send(200, {"id": state.register(m[1], body)})
                if m := re.fullmatch(r"/subjects/([^/]+)", path):
                    entry = {"schema": body.get("schema"),
                             "schemaType": body.get("schemaType", "AVRO"),
                             "references": body.get("references", [])}
                    versions = state.subjects.get(m[1], [])
                    if entry in state.schemas and state.schemas.index(entry) + 1 in versions:
                        sid = state.schemas.index(entry) + 1
                        return self.send(200, state.answer(sid, m[1], versions.index(sid) + 1))
                    return self.send(404, {"error_code": 40403, "message": "Schema not found"})
            self.send(404, {"error_code": 404, "message": "Not found"})

    return Handler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--user")
    parser.add_argument("--password")
    args = parser.parse_args()
    auth = None
    if args.user is not None:
        token = base64.b64encode(f"{args.user}:{args.password or ''}".encode()).decode()
        auth = f"Basic {token}"
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(State(args.state), auth))
    server.serve_forever()


if __name__ == "__main__":
    main()
