"""Open WebUI's Code Interpreter on a Jupyter server, reduced for the tests: the call sequence
of `execute_code_jupyter` in Open WebUI v0.10.2 (backend/open_webui/utils/code_interpreter.py,
class JupyterCodeExecuter), written here anew from reading it, with Debian's python3-aiohttp
and python3-websockets as it uses them:

  password mode: GET login (the _xsrf cookie), POST login with the form's _xsrf and password,
                 then every call with the cookies and an X-XSRFToken header;
  token mode:    ?token=T on every call (unencoded, as it does);
  POST api/kernels (no body) -> id; the channels WebSocket; one execute_request on shell;
  read messages, each within `timeout` s, skipping those whose parent_header.msg_id is not
  the request's, until a status idle; DELETE api/kernels/<id>.

It returns what Open WebUI shows (stdout, stderr, result) and, for the tests' own checks, every
message of the request and when it arrived.

Differences forced by Debian 12: websockets 10.4 names the handshake's headers extra_headers
(Open WebUI's newer websockets: additional_headers); aiohttp 3.8 takes no base_url with a path,
so each call names base_url + its relative path, which is the URL Open WebUI's calls reach.
"""

import asyncio
import json
import time
import uuid

import aiohttp
import websockets


class Outcome:
    def __init__(self):
        self.stdout = ""
        self.stderr = ""
        self.result = ""
        self.kernel_id = ""
        self.messages = []  # (seconds since the request was sent, message)
        self.timed_out = False


async def execute_code_jupyter(base_url, code, token="", password="", timeout=60,
                               before_delete=None):
    """Runs `code` as Open WebUI does; `before_delete(session, params, kernel_id)` (a
    coroutine, optional) runs between the execute and the DELETE."""
    if not base_url.endswith("/"):
        base_url += "/"
    out = Outcome()
    params = {}
    async with aiohttp.ClientSession() as session:
        try:
            if password and not token:
                async with session.get(base_url + "login") as r:
                    r.raise_for_status()
                    xsrf = r.cookies["_xsrf"].value
                    session.cookie_jar.update_cookies(r.cookies)
                    session.headers.update({"X-XSRFToken": xsrf})
                async with session.post(base_url + "login", data={"_xsrf": xsrf, "password": password}) as r:
                    r.raise_for_status()
                    session.cookie_jar.update_cookies(r.cookies)
            if token:
                params["token"] = token
            async with session.post(base_url + "api/kernels", params=params) as r:
                r.raise_for_status()
                out.kernel_id = (await r.json())["id"]
            await _execute(session, base_url, params, token, password, code, timeout, out)
            if before_delete is not None:
                await before_delete(session, params, out.kernel_id)
        finally:
            if out.kernel_id:
                async with session.delete(f"{base_url}api/kernels/{out.kernel_id}", params=params) as r:
                    r.raise_for_status()
    return out


async def _execute(session, base_url, params, token, password, code, timeout, out):
    query = "&".join(f"{k}={v}" for k, v in params.items())
    url = base_url.replace("http", "ws", 1) + f"api/kernels/{out.kernel_id}/channels"
    if query:
        url += "?" + query
    headers = {}
    if password and not token:
        headers = {"Cookie": "; ".join(f"{c.key}={c.value}" for c in session.cookie_jar)}
        headers.update(session.headers)
    msg_id = uuid.uuid4().hex
    request = {
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "user",
                   "session": uuid.uuid4().hex, "date": "", "version": "5.3"},
        "parent_header": {},
        "metadata": {},
        "content": {"code": code, "silent": False, "store_history": True,
                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
        "channel": "shell",
    }
    results = []
    async with websockets.connect(url, extra_headers=headers, max_size=None) as ws:
        await ws.send(json.dumps(request))
        sent = time.monotonic()
        while True:
            try:
                message = json.loads(await asyncio.wait_for(ws.recv(), timeout))
            except asyncio.TimeoutError:
                out.stderr += "\nExecution timed out."
                out.timed_out = True
                break
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            out.messages.append((time.monotonic() - sent, message))
            kind = message.get("msg_type")
            content = message["content"]
            if kind == "stream":
                if content["name"] == "stdout":
                    out.stdout += content["text"]
                elif content["name"] == "stderr":
                    out.stderr += content["text"]
            elif kind in ("execute_result", "display_data"):
                data = content["data"]
                if "image/png" in data:
                    results.append("data:image/png;base64," + data["image/png"])
                elif "text/plain" in data:
                    results.append(data["text/plain"])
            elif kind == "error":
                out.stderr += "\n".join(content["traceback"])
            elif kind == "status" and content["execution_state"] == "idle":
                break
    out.stdout = out.stdout.strip()
    out.stderr = out.stderr.strip()
    out.result = "\n".join(results).strip()
