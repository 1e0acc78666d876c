"""GET /openapi.json through nginx: a valid OpenAPI 3.1 document that Open WebUI can use as a
tool server, and that tells the truth about what POST /run answers.

Debian 12 packages no OpenAPI validator, so the document is checked by hand against the parts
of the OpenAPI 3.1 specification a client relies on, and every schema in it is checked as a
JSON Schema 2020-12 schema (OpenAPI 3.1's dialect) with python3-jsonschema. Real answers of
the service are then validated against the response schemas.

Run by ctest as `openwebui.openapi`; by hand (as root, after a build):
  cd tests/openwebui && SANDRUN_BUILD_DIR=/path/to/build python3 -m unittest -v test_openapi
"""

import http.client
import json
import re
import unittest

import jsonschema

from stack import Stack

STACK = None
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def setUpModule():
    global STACK
    STACK = Stack.start()


def tearDownModule():
    if STACK is not None:
        STACK.stop()


def request(method: str, path: str, body: dict = None, headers: dict = None) -> tuple:
    """(status, headers, body bytes) of one request; redirects are NOT followed."""
    conn = http.client.HTTPConnection("127.0.0.1", STACK.port, timeout=60)
    try:
        data = json.dumps(body).encode() if body is not None else None
        hdrs = {"Content-Type": "application/json"} if data is not None else {}
        hdrs.update(headers or {})
        conn.request(method, path, body=data, headers=hdrs)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def walk(node, path="#"):
    """Every (json pointer, dict) in a JSON document."""
    if isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            yield from walk(v, f"{path}/{k.replace('~', '~0').replace('/', '~1')}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, f"{path}/{i}")


def resolve(doc: dict, ref: str):
    assert ref.startswith("#/"), ref
    node = doc
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def deref(doc: dict, node: dict) -> dict:
    while isinstance(node, dict) and "$ref" in node:
        node = resolve(doc, node["$ref"])
    return node


def open_webui_tools(spec: dict) -> list:
    """The tools Open WebUI builds from an OpenAPI tool server (utils/tools.py,
    convert_openapi_to_tool_payload): one per operation with an operationId; operation
    parameters and the properties of the JSON request body become the model's parameters."""
    tools = []
    for path, methods in spec.get("paths", {}).items():
        for method, op in methods.items():
            if not isinstance(op, dict) or not op.get("operationId"):
                continue
            params = {p["name"]: p.get("schema", {}) for p in op.get("parameters", [])}
            required = [p["name"] for p in op.get("parameters", []) if p.get("required")]
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
            schema = deref(spec, body.get("schema", {}))
            params.update(schema.get("properties", {}))
            required += schema.get("required", [])
            tools.append({"name": op["operationId"],
                          "description": op.get("description", op.get("summary", "")),
                          "parameters": params, "required": required})
    return tools


class OpenApiDocument(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.status, cls.headers, raw = request("GET", "/openapi.json")
        cls.spec = json.loads(raw) if cls.status == 200 else None

    def test_served_directly_as_json_without_a_token(self):
        self.assertEqual(self.status, 200, "no redirect, no token needed")
        self.assertTrue(self.headers["content-type"].startswith("application/json"))

    def test_other_methods_are_refused(self):
        status, headers, body = request("POST", "/openapi.json", {})
        self.assertEqual(status, 405)
        self.assertIn("GET", headers.get("allow", ""))
        self.assertEqual(json.loads(body)["error"]["code"], "method_not_allowed")

    def test_openapi_3_1_top_level(self):
        spec = self.spec
        self.assertRegex(spec["openapi"], r"^3\.1\.\d+$")
        self.assertTrue(spec["info"]["title"])
        self.assertTrue(spec["info"]["version"])
        allowed = {"openapi", "info", "jsonSchemaDialect", "servers", "paths", "webhooks",
                   "components", "security", "tags", "externalDocs"}
        self.assertLessEqual({k for k in spec if not k.startswith("x-")}, allowed)
        for path in spec["paths"]:
            self.assertTrue(path.startswith("/"), path)
        # A relative (or absent) server: clients call /run on the host they fetched this from.
        for server in spec.get("servers", []):
            self.assertFalse(re.match(r"^[a-z]+://", server["url"]), server)

    def test_every_operation_has_an_id_responses_and_a_request_schema(self):
        ids = []
        for path, item in self.spec["paths"].items():
            for method, op in item.items():
                if method not in HTTP_METHODS:
                    continue
                with self.subTest(operation=f"{method.upper()} {path}"):
                    self.assertRegex(op.get("operationId", ""), r"^[A-Za-z0-9_]+$")
                    ids.append(op["operationId"])
                    self.assertTrue(op.get("description") or op.get("summary"))
                    self.assertIn("200", op["responses"])
                    for code, response in op["responses"].items():
                        self.assertRegex(code, r"^([1-5]\d\d|[1-5]XX|default)$")
                        self.assertTrue(deref(self.spec, response).get("description"), code)
                    if method in ("post", "put", "patch"):
                        body = op["requestBody"]["content"]["application/json"]
                        schema = deref(self.spec, body["schema"])
                        self.assertEqual(schema["type"], "object")
                        self.assertTrue(schema["properties"])
        self.assertEqual(len(ids), len(set(ids)), "operationIds are unique")

    def test_run_is_the_run_code_operation(self):
        op = self.spec["paths"]["/run"]["post"]
        self.assertEqual(op["operationId"], "run_code")
        schema = op["requestBody"]["content"]["application/json"]["schema"]
        self.assertEqual(sorted(schema["required"]), ["code", "language"])
        self.assertEqual(schema["properties"]["language"]["enum"], ["python", "bash"])

    def test_bearer_auth(self):
        schemes = self.spec["components"]["securitySchemes"]
        bearer = [name for name, s in schemes.items()
                  if s["type"] == "http" and s["scheme"].lower() == "bearer"]
        self.assertTrue(bearer)
        # The test stack requires a token, so no anonymous ({}) alternative is offered.
        self.assertEqual(self.spec["security"], [{bearer[0]: []}])

    def test_identity_headers_are_documented_but_not_model_parameters(self):
        params = self.spec["components"]["parameters"]
        headers = {p["name"] for p in params.values() if p["in"] == "header"}
        self.assertEqual(headers, {"X-Sandrun-User", "X-Sandrun-Session"})
        (tool,) = open_webui_tools(self.spec)
        self.assertEqual(tool["name"], "run_code")
        self.assertEqual(set(tool["parameters"]), {"language", "code", "stdin"})
        self.assertEqual(sorted(tool["required"]), ["code", "language"])

    def test_description_is_a_tool_prompt(self):
        (tool,) = open_webui_tools(self.spec)
        text = tool["description"]
        self.assertLess(len(text), 2000, "every chat pays for the tool prompt")
        for phrase in ("sandbox", "print", "![name](url)", "[name](url)", "stderr"):
            self.assertIn(phrase, text)
        for name, prop in tool["parameters"].items():
            self.assertTrue(prop.get("description"), f"{name} has no description")

    def test_every_ref_resolves(self):
        for pointer, node in walk(self.spec):
            if "$ref" in node and isinstance(node["$ref"], str):
                with self.subTest(at=pointer):
                    resolve(self.spec, node["$ref"])

    def test_every_schema_is_json_schema_2020_12(self):
        schemas = dict(self.spec["components"]["schemas"])
        for pointer, node in walk(self.spec["paths"], "#/paths"):
            if "schema" in node and isinstance(node["schema"], dict):
                schemas[pointer] = node["schema"]
        for p in self.spec["components"]["parameters"].values():
            schemas[p["name"]] = p["schema"]
        for name, schema in schemas.items():
            with self.subTest(schema=name):
                jsonschema.Draft202012Validator.check_schema(schema)


class AnswersMatchTheDocument(unittest.TestCase):
    """Real answers of POST /run validate against the response schemas."""

    @classmethod
    def setUpClass(cls):
        status, _, raw = request("GET", "/openapi.json")
        assert status == 200, status
        cls.spec = json.loads(raw)
        cls.op = cls.spec["paths"]["/run"]["post"]

    def validate(self, status: int, body: dict):
        response = deref(self.spec, self.op["responses"][str(status)])
        schema = response["content"]["application/json"]["schema"]
        resolver = jsonschema.RefResolver.from_schema(self.spec)
        jsonschema.Draft202012Validator(schema, resolver=resolver).validate(body)

    def run_code(self, body: dict, token: str = None) -> tuple:
        token = STACK.token if token is None else token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        headers.update({"X-Sandrun-User": "ada", "X-Sandrun-Session": "chat-openapi"})
        status, _, raw = request("POST", "/run", body, headers)
        return status, json.loads(raw)

    def test_ok_run_with_a_file(self):
        status, body = self.run_code({"language": "python",
                                      "code": "open('out.txt', 'w').write('x')\nprint(1)"})
        self.assertEqual((status, body["status"]), (200, "ok"), body)
        self.validate(200, body)
        self.assertEqual([f["name"] for f in body["files"]], ["out.txt"])
        # The validation has teeth: a status the document does not list is refused.
        with self.assertRaises(jsonschema.ValidationError):
            self.validate(200, dict(body, status="exploded"))
        with self.assertRaises(jsonschema.ValidationError):
            self.validate(200, dict(body, files=[{"name": "out.txt"}]))

    def test_failed_run(self):
        status, body = self.run_code({"language": "bash", "code": "echo oops >&2; exit 3"})
        self.assertEqual((status, body["status"], body["exit_code"]), (200, "error", 3))
        self.validate(200, body)

    def test_errors(self):
        for request_body, token, want in (
            ({"language": "python", "code": "print(1)"}, "", 401),
            ({"language": "cobol", "code": "x"}, None, 400),
            ({"language": "python", "code": "1", "network": True}, None, 403),
        ):
            with self.subTest(want=want):
                status, body = self.run_code(request_body, token)
                self.assertEqual(status, want, body)
                self.validate(status, body)

    def test_the_tool_call_open_webui_makes(self):
        # What Open WebUI sends: the model's arguments as the JSON body, the bearer token of
        # the connection, and the connection's header templates filled in.
        status, body = self.run_code({"language": "python", "code": "print(2 + 2)"})
        self.assertEqual((status, body["stdout"]), (200, "4\n"))


if __name__ == "__main__":
    unittest.main()
