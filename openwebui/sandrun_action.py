"""
title: Run with sandrun
author: sandrun
version: 1.0.0
required_open_webui_version: 0.5.0
description: A Run button under every answer: runs the answer's code blocks in a sandrun sandbox (in order, in one workspace per chat) and appends their output, plots and download links to the answer.
licence: MIT
"""

# Open WebUI Action function. Paste this file in Admin Panel -> Functions -> New function,
# fill in the valves (service URL, token), and enable it globally or per model. Only the Python
# standard library and pydantic (which Open WebUI ships) are used: the HTTP call runs in a
# worker thread, so Open WebUI's event loop never waits on it.
#
# The message is sent as `markdown` to POST /run: sandrun itself picks the runnable fenced
# blocks (DESIGN.md §5) and says in `plan` which ones it ran and why it skipped the others.
# The run is asked for as a stream: while it goes on, each block's code execution entry shows
# its output so far (about once a second); a server that does not stream answers as before.

import asyncio
import base64
import hashlib
import http.client
import importlib
import inspect
import json
import re
import signal
import socket
import threading
import urllib.error
import urllib.request
import uuid
from html.parser import HTMLParser
from typing import Any, Awaitable, Callable, Optional

from pydantic import BaseModel, Field

# --- sandrun client: begin ------------------------------------------------------------------
# The same text in sandrun_action.py and sandrun_tool.py (a test checks): each file must stand
# alone, since Open WebUI installs a plugin by pasting one file.

# Added to the run's wall-clock limit to bound the whole HTTP exchange: the wait for a free
# sandbox (the server's queue_wait_s, 10 s by default), setting it up and publishing its files.
HTTP_MARGIN_S = 30
RASTER_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


class Reply:
    """An HTTP answer from sandrun: status, JSON body (None if not JSON), raw text, headers."""

    def __init__(self, status: int, body: Any, text: str, headers: dict):
        self.status = status
        self.body = body
        self.text = text
        self.headers = headers


class Unreachable(Exception):
    """No HTTP answer at all: connection refused, unknown host, timeout. str() is a sentence."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A redirect is reported, not followed: urllib would turn the POST into a GET, and Open
    # WebUI's own tool-server client does not follow redirects either.
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def service_base(url: str) -> str:
    """The service URL without a trailing slash or a pasted '/run'."""
    url = (url or "").strip().rstrip("/")
    if url.endswith("/run"):
        url = url[: -len("/run")]
    return url


def post_run(base_url: str, token: str, payload: dict, timeout_s: float,
             live: Optional["LiveOutput"] = None) -> Reply:
    """POST payload to <base_url>/run and wait for the answer. Blocking: call it in a thread.
    Raises Unreachable when no HTTP answer arrives within timeout_s. With `live`, the run is
    asked for as a stream: its output goes into `live` as it comes, and the Reply is the
    stream's last event; a server that answers plain JSON (an older sandrun, or an error) is
    read as without `live`."""
    base = service_base(base_url)
    if not base.startswith(("http://", "https://")):
        raise Unreachable(
            "The 'service_url' valve is not set to a web address: set it to sandrun's, e.g. "
            "http://127.0.0.1:8080."
            if not base
            else f"The 'service_url' valve ({base}) must start with http:// or https://."
        )
    request = urllib.request.Request(
        base + "/run",
        data=json.dumps(payload).encode("utf-8"),
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Accept": STREAM_TYPE if live is not None else "application/json",
            "User-Agent": "sandrun-openwebui/1.0",
        },
    )
    if token:
        request.add_header("Authorization", "Bearer " + token.strip())
    # The user in a header too (the body's and the header's must agree): a front nginx of
    # several sandrun nodes sees only headers, and keeps each user on one node by them.
    user = str(payload.get("user") or "")
    if user and user.isascii() and user.isprintable():
        request.add_header("X-Sandrun-User", user)
    opener = urllib.request.build_opener(_NoRedirect())
    try:
        with opener.open(request, timeout=timeout_s) as response:
            status, headers = response.status, dict(response.headers)
            lower = {k.lower(): v for k, v in headers.items()}
            streamed = lower.get("content-type", "").split(";")[0].strip() == STREAM_TYPE
            if live is not None and status == 200 and streamed:
                return read_stream(response, live, base_url, lower)
            raw = response.read()
    except urllib.error.HTTPError as e:
        status, headers, raw = e.code, dict(e.headers or {}), e.read() or b""
    except (socket.timeout, TimeoutError):
        raise Unreachable(
            f"sandrun at {service_base(base_url)} did not answer within {timeout_s:.0f} s; "
            "the run may still be going on the server."
        )
    except urllib.error.URLError as e:
        raise Unreachable(_unreachable_sentence(base_url, e.reason))
    except (OSError, ValueError) as e:
        raise Unreachable(_unreachable_sentence(base_url, e))
    text = raw.decode("utf-8", "replace")
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    return Reply(status, body, text, {k.lower(): v for k, v in headers.items()})


def _unreachable_sentence(base_url: str, reason: Any) -> str:
    if isinstance(reason, (socket.timeout, TimeoutError)):
        why = "the connection timed out"
    elif isinstance(reason, ConnectionRefusedError):
        why = "the connection was refused (nothing listens there)"
    elif isinstance(reason, socket.gaierror):
        why = "the host name does not resolve"
    else:
        why = str(reason) or type(reason).__name__
    return (
        f"Could not reach sandrun at {service_base(base_url) or '(no URL set)'}: {why}. "
        "Check the 'service_url' valve and that Open WebUI can reach that address."
    )


async def call_sandrun(base_url: str, token: str, payload: dict, timeout_s: float,
                       progress: Optional[Callable[[list], Awaitable[Any]]] = None) -> Reply:
    """post_run in a worker thread, so that Open WebUI's event loop keeps running. With
    `progress`, the run is streamed, and while it goes on `progress` is called every
    PROGRESS_INTERVAL_S with what it printed so far (LiveOutput.snapshot())."""
    live = LiveOutput() if progress is not None else None
    work = asyncio.ensure_future(
        asyncio.to_thread(post_run, base_url, token, payload, timeout_s, live)
    )
    # Whatever happens to it after this call gave up on it is of no interest.
    work.add_done_callback(lambda f: f.cancelled() or f.exception())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s + 5
    try:
        while loop.time() < deadline:
            wait = min(deadline - loop.time(), PROGRESS_INTERVAL_S if live else timeout_s + 5)
            done, _ = await asyncio.wait({work}, timeout=max(wait, 0))
            if done:
                return work.result()
            if live is not None:
                await progress(live.snapshot())
    finally:
        if live is not None and not work.done():
            live.stopped = True
    raise Unreachable(
        f"sandrun at {service_base(base_url)} did not answer within {timeout_s:.0f} s; "
        "the run may still be going on the server."
    )


def failure_sentence(reply: Reply, base_url: str) -> str:
    """A sentence for an answer other than 200 with a run result."""
    error = reply.body.get("error") if isinstance(reply.body, dict) else None
    code = error.get("code", "") if isinstance(error, dict) else ""
    message = (error.get("message", "") if isinstance(error, dict) else "").rstrip(".")
    url = service_base(base_url)
    s = reply.status
    if 300 <= s < 400:
        where = reply.headers.get("location", "another address")
        return (
            f"{url} answered with a redirect to {where}. Put the final address in the "
            "'service_url' valve: redirects are not followed."
        )
    if error is None and s != 200:
        snippet = " ".join(reply.text.split())[:160]
        return (
            f"{url} answered HTTP {s} with something that is not sandrun's JSON"
            f"{': ' + snippet if snippet else ''}. Check that the 'service_url' valve points at "
            "sandrun's nginx."
        )
    if s == 200:
        return (
            f"{url} answered, but not with a sandrun run result. Check that the 'service_url' "
            "valve points at sandrun's nginx."
        )
    if s == 400:
        if code == "invalid_package":
            return (
                f"sandrun refused an entry of the plugin's 'packages' valve: {message}. "
                "Correct it in the valves (names with optional versions, comma-separated)."
            )
        if code == "not_supported":
            return f"This sandrun server does not support that request yet: {message}."
        if code == "no_runnable_code":
            return f"There is no code to run here: {message}."
        if code in ("limit_above_ceiling", "limit_below_minimum"):
            return (
                f"The limits in this plugin's valves are outside what the server allows: "
                f"{message}. Change them in the valves."
            )
        return f"sandrun refused the request: {message}."
    if s == 401:
        return "sandrun refused the bearer token: put a valid token in the plugin's 'token' valve."
    if s == 403:
        if code == "network_forbidden" and error.get("field") == "packages":
            return (
                "This sandrun server cannot prepare the packages of the plugin's 'packages' "
                f"valve: {message}."
            )
        if code == "network_forbidden":
            return (
                "This sandrun server does not allow network access: turn the plugin's "
                "'network' valve off."
            )
        return f"sandrun refused access: {message}."
    if s in (404, 405):
        return (
            f"There is no sandrun service at {url} (HTTP {s}): check the plugin's "
            "'service_url' valve."
        )
    if s == 409:
        return "An earlier run in this chat is still going: try again when it has finished."
    if s == 413:
        return "This is too large for sandrun to accept (HTTP 413)."
    if s == 429:
        return "Too many runs for this user right now: wait a few seconds and try again."
    if s == 500:
        if code == "sandbox_error":
            return f"sandrun could not build a sandbox for this run: {message}."
        return f"sandrun failed with an internal error: {message}."
    if s == 502:
        return "nginx in front of sandrun cannot reach the sandrun daemon: is sandrund running?"
    if s == 503:
        if code == "environment_building":
            wait = reply.headers.get("retry-after", "a few")
            return (
                "sandrun is still installing the packages of the plugin's 'packages' valve: "
                f"try again in {wait} s."
            )
        if code == "busy":
            wait = reply.headers.get("retry-after", "a few")
            return f"sandrun is busy: all its sandboxes are in use. Try again in {wait} s."
        return f"sandrun cannot run code right now: {message}."
    if s == 504:
        return "The sandrun daemon did not answer nginx in time."
    return f"sandrun answered HTTP {s}: {message or reply.text[:160]}."


def signal_name(number: Any) -> str:
    try:
        return signal.Signals(int(number)).name
    except (TypeError, ValueError):
        return "unknown"


def seconds(ms: Any) -> str:
    try:
        s = float(ms) / 1000.0
    except (TypeError, ValueError):
        return "?"
    if s < 0.1:
        return "under 0.1 s"
    return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"


def human_size(n: Any) -> str:
    try:
        n = float(n)
    except (TypeError, ValueError):
        return "?"
    for unit in ("bytes", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024.0
    return f"{n:.1f} GiB"


def outcome_sentence(result: dict) -> str:
    """What happened to a run that sandrun carried out (HTTP 200), in a sentence."""
    status = result.get("status")
    limits = result.get("limits") or {}
    took = seconds((result.get("usage") or {}).get("wall_ms"))
    if status == "ok":
        return f"The code ran successfully in {took}."
    if status == "error" and result.get("exit_code") is None:  # a kernel's cell
        return "The code raised an error (the traceback is in stderr)."
    if status == "error" and result.get("exit_code") == 0:
        # e.g. a fork bomb: the program exited 0, a process it started hit a limit
        return "The run failed although the program exited 0 (stderr says why)."
    if status == "error":
        return f"The code failed with exit code {result.get('exit_code')}."
    if status == "killed":
        sig = result.get("signal")
        if sig is None:  # a kernel that died: no process of the run's own to name a signal of
            return "The program was killed."
        return f"The program was killed by signal {sig} ({signal_name(sig)})."
    if status == "timeout":
        return (
            "Stopped: the run reached its time limit "
            f"({limits.get('wall_time_s', '?')} s of wall-clock time, "
            f"{limits.get('cpu_time_s', '?')} s of CPU time)."
        )
    if status == "memory_limit":
        return (
            "Stopped: the run needed more than its memory limit of "
            f"{limits.get('memory_mb', '?')} MiB."
        )
    if status == "output_limit":
        return (
            "Stopped: the program printed more than the output limit of "
            f"{human_size(limits.get('output_bytes'))}; the output is cut."
        )
    if status == "file_limit":
        return (
            "The code ran, but its files went over the limits for saved files (at most "
            f"{limits.get('max_files', '?')} files of {limits.get('file_size_mb', '?')} MiB each, "
            "within the user's quota): some files were not saved."
        )
    if status == "sandbox_error":
        return "sandrun could not build a sandbox for this run."
    return f"The run ended with status '{status}'."


def clip(text: str, limit: int) -> str:
    """At most about `limit` characters: the head and the tail, with a marker between."""
    if limit <= 0 or len(text) <= limit:
        return text
    head = text[: limit * 2 // 3]
    tail = text[len(text) - limit // 3 :]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} characters cut ...]\n{tail}"


def fenced(text: str, info: str = "text") -> str:
    """`text` in a fenced code block whose fence is longer than any backtick run inside."""
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") else text + "\n"
    return f"{fence}{info}\n{body}{fence}"


def _link_text(name: str) -> str:
    return "".join("\\" + c if c in "\\[]" else c for c in name)


def _link_target(url: str) -> str:
    # Pointy brackets keep a URL with spaces or parentheses in one piece (CommonMark).
    return f"<{url}>" if any(c in url for c in " ()<>") else url


def file_markdown(f: dict) -> str:
    """A raster image as an inline markdown image, any other file as a link with its size."""
    name, url = _link_text(f.get("name") or f.get("path") or "file"), _link_target(f.get("url", ""))
    if f.get("mime") in RASTER_IMAGE_TYPES:
        return f"![{name}]({url})"
    return f"[{name}]({url}) ({human_size(f.get('size'))})"


def skipped_files_line(result: dict) -> str:
    """'Not saved: a (too_large), b (symlink).' Ignored paths (caches, pip's files) are noise."""
    items = [
        f"{s.get('path')} ({s.get('reason')})"
        for s in result.get("files_skipped") or []
        if s.get("reason") != "ignored"
    ]
    return ("Not saved: " + ", ".join(items) + ".") if items else ""


def _inert_markdown(text: str) -> str:
    """A table or text a program made, as Markdown that can only be a table or text: no HTML,
    no links and no images (those would load from anywhere when the chat is shown)."""
    return "".join("\\" + c if c in "[]" else {"<": "&lt;", ">": "&gt;", "&": "&amp;"}.get(c, c)
                   for c in text)


def displays_markdown(result: dict, images: Optional[dict] = None) -> list:
    """The run's `displays` (what the program showed: charts, tables) as Markdown, in order:
    an image inline (at the URL `images` maps its link to, if any), a table as a Markdown table
    (an HTML table too: a kernel's DataFrame), text as text."""
    parts = []
    for d in result.get("displays") or []:
        if not isinstance(d, dict):
            continue
        kind, text, f, mime = d.get("kind"), d.get("text"), d.get("file"), d.get("mime")
        if kind == "image" and isinstance(f, dict) and f.get("mime") in RASTER_IMAGE_TYPES:
            parts.append(file_markdown(dict(f, url=(images or {}).get(f.get("url"), f.get("url")))))
        elif kind in ("table", "text") and isinstance(text, str) and text.strip():
            if mime == "text/html":
                parts.append(_inert_markdown(html_table_markdown(text)))
            elif kind == "table" or mime == "text/markdown":
                parts.append(_inert_markdown(text))
            else:
                parts.append(fenced(text))
    return parts


def displayed_urls(result: dict) -> set:
    """URLs of the files `displays` shows, so that a file list need not repeat them."""
    return {
        d["file"].get("url")
        for d in result.get("displays") or []
        if isinstance(d, dict) and isinstance(d.get("file"), dict)
    }


def packages_list(valve: str) -> list:
    """The `packages` valve (comma-separated requirements) as the request's list."""
    return [p.strip() for p in valve.split(",") if p.strip()]


def limits_payload(wall_time_s: int, memory_mb: int) -> dict:
    """The `limits` object: one time valve sets both the wall-clock and the CPU limit, since a
    user means the one they notice; 0 leaves a limit at the server's default."""
    limits = {}
    if wall_time_s > 0:
        limits["wall_time_s"] = wall_time_s
        limits["cpu_time_s"] = wall_time_s
    if memory_mb > 0:
        limits["memory_mb"] = memory_mb
    return limits


def http_timeout(wall_time_s: int) -> float:
    # 300 s is the server's default ceiling: the longest a run with the default wall time can
    # take if the valve leaves it to the server.
    return float((wall_time_s if wall_time_s > 0 else 300) + HTTP_MARGIN_S)


async def emit(emitter: Optional[Callable[[dict], Awaitable[Any]]], event: dict) -> None:
    if emitter is not None:
        await emitter(event)


def status_event(description: str, done: bool) -> dict:
    return {"type": "status", "data": {"description": description, "done": done, "hidden": False}}


def code_execution_event(
    id_: str, name: str, language: str, code: str, result: Optional[dict]
) -> dict:
    """An Open WebUI code execution entry; without `result` it shows as running. Emitting the
    same id again replaces the entry."""
    data = {"type": "code_execution", "id": id_, "name": name, "language": language, "code": code}
    if result is not None:
        data["result"] = result
    return {"type": "source", "data": data}


# --- inside Open WebUI: its own modules, when the plugin runs in its server -----------------

# The largest image copied into Open WebUI's file store; a larger one keeps sandrun's link.
MAX_KEPT_IMAGE_BYTES = 8 * 1024 * 1024
IMAGE_FETCH_TIMEOUT_S = 15


def open_webui_module(name: str) -> Any:
    """One of Open WebUI's modules (e.g. "open_webui.models.chats"), or None outside it."""
    try:
        return importlib.import_module(name)
    except Exception:
        return None


async def resolved(value: Any) -> Any:
    """Open WebUI's model functions are coroutines since 0.10 and plain functions before."""
    return await value if inspect.isawaitable(value) else value


def _fetch_image(url: str, sha256: str) -> Optional[tuple]:
    """(bytes, mime) of a raster image behind a sandrun link, or None: not a raster image,
    over MAX_KEPT_IMAGE_BYTES, not the bytes sandrun announced, or not reachable. Only an
    http(s) link is fetched (never file: or ftp:), and no redirect is followed."""
    if not url.lower().startswith(("http://", "https://")):
        return None
    try:
        request = urllib.request.Request(url, headers={"User-Agent": "sandrun-openwebui/1.0"})
        opener = urllib.request.build_opener(_NoRedirect())
        with opener.open(request, timeout=IMAGE_FETCH_TIMEOUT_S) as response:
            mime = (response.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            data = response.read(MAX_KEPT_IMAGE_BYTES + 1)
    except Exception:
        return None
    if mime not in RASTER_IMAGE_TYPES or len(data) > MAX_KEPT_IMAGE_BYTES:
        return None
    if sha256 and hashlib.sha256(data).hexdigest() != sha256.lower():
        return None
    return data, mime


async def keep_image(file: dict, request: Any, user: Optional[dict], where: dict) -> str:
    """The URL to show a raster image with. Inside Open WebUI (a request and a user), the image
    is stored in Open WebUI's own file store under that user, linked to the chat message in
    `where` ({chat_id, message_id}), by the function Open WebUI's code interpreter uses for its
    images (utils/files.py get_image_url_from_base64): the chat keeps it after sandrun's
    expiring link is gone. Anywhere else, or if storing fails, sandrun's signed link."""
    url = file.get("url") or ""
    if request is None or not (user or {}).get("id") or file.get("mime") not in RASTER_IMAGE_TYPES:
        return url
    files_module = open_webui_module("open_webui.utils.files")
    users_module = open_webui_module("open_webui.models.users")
    store = getattr(files_module, "get_image_url_from_base64", None)
    users = getattr(users_module, "Users", None)
    if store is None or users is None or not url:
        return url
    fetched = await asyncio.to_thread(_fetch_image, url, str(file.get("sha256") or ""))
    if fetched is None:
        return url
    data, mime = fetched
    try:
        owner = await resolved(users.get_user_by_id(str(user["id"])))
        if owner is None:
            return url
        uri = f"data:{mime};base64," + base64.b64encode(data).decode("ascii")
        kept = await resolved(store(request, uri, dict(where), owner))
    except Exception:
        return url
    return kept if isinstance(kept, str) and kept else url


async def kept_images(result: dict, request: Any, user: Optional[dict], where: dict) -> dict:
    """sandrun link -> URL to show, for every raster image of the run (files and displays)."""
    images = {}
    for f in list(result.get("files") or []) + [
        d.get("file") for d in result.get("displays") or [] if isinstance(d, dict)
    ]:
        if isinstance(f, dict) and f.get("mime") in RASTER_IMAGE_TYPES and f.get("url"):
            if f["url"] not in images:
                images[f["url"]] = await keep_image(f, request, user, where)
    return images


def shown_images(result: dict) -> list:
    """The raster images of a run, each once: what `displays` showed, then saved image files.
    A stateful run's shown figures are only in `displays`; they count as the run's files."""
    seen, images = set(), []
    for f in [d.get("file") for d in result.get("displays") or [] if isinstance(d, dict)] + list(
        result.get("files") or []
    ):
        if isinstance(f, dict) and f.get("mime") in RASTER_IMAGE_TYPES and f.get("url"):
            if f["url"] not in seen:
                seen.add(f["url"])
                images.append(f)
    return images


async def saved_message(chat_id: str, message_id: str) -> Optional[dict]:
    """The chat message as Open WebUI has saved it (models/chats.py), or None outside Open
    WebUI. Open WebUI 0.10 keeps an answer's parts in its `output` items; earlier versions
    only in `content`."""
    chats = getattr(open_webui_module("open_webui.models.chats"), "Chats", None)
    if chats is None or not chat_id or not message_id or chat_id.startswith("local:"):
        return None
    try:
        message = await resolved(chats.get_message_by_id_and_message_id(chat_id, message_id))
    except Exception:
        return None
    return message if isinstance(message, dict) else None


async def save_message_fields(chat_id: str, message_id: str, fields: dict) -> bool:
    """Merges `fields` into the saved message (Open WebUI's own upsert), so that a chat opened
    later shows them even if no browser tab saved the chat."""
    chats = getattr(open_webui_module("open_webui.models.chats"), "Chats", None)
    if chats is None or not chat_id or not message_id or chat_id.startswith("local:"):
        return False
    try:
        await resolved(
            chats.upsert_message_to_chat_by_id_and_message_id(chat_id, message_id, fields)
        )
    except Exception:
        return False
    return True


class _HtmlTable(HTMLParser):
    """The cells of an HTML table (pandas' DataFrame._repr_html_ and the like), as text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.rows: list = []
        self.notes: list = []
        self._row: Optional[list] = None
        self._cell: Optional[list] = None
        self._hidden = 0
        self._tables = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("style", "script"):
            self._hidden += 1
        elif tag == "table":
            self._tables += 1
        elif tag == "tr" and self._tables:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append(" ")

    def handle_endtag(self, tag):
        if tag in ("style", "script"):
            self._hidden = max(0, self._hidden - 1)
        elif tag == "table":
            self._tables = max(0, self._tables - 1)
        elif tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._row:
                self.rows.append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._hidden:
            return
        if self._cell is not None:
            self._cell.append(data)
        elif not self._tables and data.strip():
            self.notes.append(" ".join(data.split()))


def html_table_markdown(text: str, max_rows: int = 60, max_cols: int = 30) -> str:
    """An HTML table as a Markdown table (first row as the header), with any text around it
    (pandas' "N rows × M columns") after; HTML without a table as its text. Never HTML."""
    reader = _HtmlTable()
    try:
        reader.feed(text)
        reader.close()
    except Exception:
        return " ".join(text.split())
    rows = [[c[:200].replace("|", "\\|") for c in r[:max_cols]] for r in reader.rows]
    if not rows:
        return " ".join(reader.notes)
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * width]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1 : max_rows + 1]]
    if len(rows) > max_rows + 1:
        lines.append(f"({len(rows) - 1 - max_rows} more rows not shown)")
    return "\n".join(lines + ([""] + reader.notes if reader.notes else []))

def _table_rows(markdown: str) -> list:
    """The rows of a Markdown table (cells as text), its separator row left out."""
    rows = []
    for line in markdown.strip().splitlines():
        s = line.strip()
        if not (s.startswith("|") and s.endswith("|") and len(s) > 1):
            break
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", s[1:-1])]
        if all(re.fullmatch(r":?-+:?", c) for c in cells if c) and any(cells):
            continue
        rows.append(cells)
    return rows


def _same_value(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def _line_is_row(line: str, cells: list) -> bool:
    want, got = " ".join(cells).split(), line.split()
    return len(want) == len(got) and all(map(_same_value, got, want))


def without_shown_tables(text: str, result: dict, search_lines: int = 5000) -> str:
    """`text` (printed output) without the text form of each table `displays` shows: a
    notebook's trailing DataFrame is printed as text and shown as a table; it is shown once,
    as the table. Only an exact match of every row (numbers compared as numbers, so 12.50 is
    12.5) is taken out; a table printed differently (cut, wrapped) stays."""
    tables = []
    for d in result.get("displays") or []:
        if isinstance(d, dict) and d.get("kind") == "table" and isinstance(d.get("text"), str):
            markdown = d["text"]
            if d.get("mime") == "text/html":
                markdown = html_table_markdown(markdown)
            tables.append(_table_rows(markdown))
    lines = text.split("\n")
    for rows in tables:
        n = len(rows)
        if n < 2 or n > len(lines):
            continue
        for start in range(len(lines) - n, max(-1, len(lines) - n - search_lines), -1):
            if all(_line_is_row(lines[start + i], rows[i]) for i in range(n)):
                del lines[start : start + n]
                break
    return "\n".join(lines)


# --- streamed runs: the output so far, shown while the run goes on ---------------------------

# How often, at most, the output of a streamed run is shown again while it runs (seconds).
PROGRESS_INTERVAL_S = 1.0
STREAM_TYPE = "application/x-ndjson"


class LiveOutput:
    """What a streamed run (POST /run with Accept: application/x-ndjson) has printed so far,
    per step, from its events. The thread that reads the stream adds to it; the event loop
    takes snapshots. `stopped` is set by the event loop when it gives up on the run: the
    reader then closes the stream, which ends the run on the server."""

    def __init__(self):
        self._lock = threading.Lock()
        self._steps: list = []
        self.stopped = False

    def add(self, event: dict) -> None:
        kind, index = event.get("event"), event.get("index")
        with self._lock:
            if kind == "step":
                self._steps.append({"index": index if _is_index(index) else len(self._steps),
                                    "language": str(event.get("language") or ""),
                                    "stdout": "", "stderr": "", "status": None})
            elif kind in ("stdout", "stderr") and isinstance(event.get("text"), str):
                self._step(index)[kind] += event["text"]
            elif kind == "step_end":
                self._step(index)["status"] = str(event.get("status") or "")

    def _step(self, index: Any) -> dict:
        for step in reversed(self._steps):
            if step["index"] == index:
                return step
        # Output of a step whose start was not announced: a step of its own.
        self._steps.append({"index": index if _is_index(index) else len(self._steps),
                            "language": "", "stdout": "", "stderr": "", "status": None})
        return self._steps[-1]

    def snapshot(self) -> list:
        """The steps so far, in order: {index, language, stdout, stderr, status (None while
        the step runs)}, copies."""
        with self._lock:
            return [dict(step) for step in self._steps]


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**6


def _stream_broke(base_url: str, why: str) -> Unreachable:
    return Unreachable(
        f"The connection to sandrun at {service_base(base_url)} broke off during the run "
        f"({why}), so its result never came; the run was stopped. Run it again."
    )


def read_stream(response: Any, live: LiveOutput, base_url: str, headers: dict) -> Reply:
    """The events of a streamed run, one JSON object a line, from `response` (anything with
    readline()) into `live`; the Reply of its last event: `result` (the plain answer, HTTP
    200) or `error` (as an error body). Raises Unreachable when the stream ends before that."""
    while True:
        try:
            line = response.readline()
        except (socket.timeout, TimeoutError):
            raise _stream_broke(base_url, "sandrun sent nothing for too long")
        except (OSError, ValueError, http.client.HTTPException) as e:
            raise _stream_broke(base_url, str(e) or type(e).__name__)
        if live.stopped:
            raise Unreachable("The run was stopped.")
        if not line:
            raise _stream_broke(base_url, "the stream ended early")
        if not line.strip():
            continue
        try:
            event = json.loads(line.decode("utf-8", "replace"))
        except ValueError:
            raise _stream_broke(base_url, "a line of the stream was cut or is not JSON")
        if not isinstance(event, dict):
            continue
        if event.get("event") == "result" and isinstance(event.get("result"), dict):
            return Reply(200, event["result"], json.dumps(event["result"]), headers)
        if event.get("event") == "error":
            error = event.get("error") if isinstance(event.get("error"), dict) else {}
            return Reply(500, {"error": error}, json.dumps({"error": error}), headers)
        live.add(event)


class LiveEntries:
    """Emits events (code execution entries) only when one differs from the last emitted with
    its id: the chat is not told again what it shows already."""

    def __init__(self, emitter: Optional[Callable[[dict], Awaitable[Any]]]):
        self.emitter = emitter
        self.shown: dict = {}

    async def show(self, events: list) -> None:
        for event in events:
            key = (event.get("data") or {}).get("id")
            if self.shown.get(key) != event:
                self.shown[key] = json.loads(json.dumps(event))
                await emit(self.emitter, event)


def live_output_text(step: dict, limit: int) -> str:
    """The output so far of a streamed step, as its code execution entry shows output: stdout,
    then stderr under a "[stderr]" line; each cut in the middle when longer than `limit`."""
    text = clip(step.get("stdout") or "", limit)
    if step.get("stderr"):
        if text and not text.endswith("\n"):
            text += "\n"
        text += "[stderr]\n" + clip(step["stderr"], limit)
    return text


# --- sandrun client: end --------------------------------------------------------------------


# What this Action appends starts with this line; a second click runs the answer, not the
# output of the first.
APPENDIX_MARKER = "\n\n---\n**sandrun:** "
# Open WebUI keeps a model's reasoning and its tool and code-interpreter calls inside the answer
# as <details type="..."> elements: not code the user was shown as the answer.
OPEN_WEBUI_DETAILS = re.compile(
    r'<details\s+type="(?:reasoning|code_interpreter|tool_calls)"[^>]*>.*?</details>\s*', re.S
)
# Added to the name of a block's code execution entry while it runs.
RUNNING = " · running…"
# The `output` item this Action adds to an answer of Open WebUI 0.10 or later; its id starts
# with this, so that a second click replaces the first one's.
OUTPUT_ITEM_PREFIX = "sandrun-output-"

# Code blocks that read standard input: Python's input(), sys.stdin, fileinput; a shell `read`
# that no redirection on its line feeds.
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})([^\n]*)\n(.*?)^ {0,3}\1[`~]*[ \t]*$", re.M | re.S)
_PY_STDIN = re.compile(r"\binput\s*\(|\bsys\.stdin\b|\bfileinput\.input\s*\(|\bopen\(\s*0\s*[,)]")
_SH_STDIN = re.compile(r"(?:^\s*|[;&|({]\s*|\bwhile\s+|\bif\s+)read\b(?![^\n]*<)", re.M)
_PY_LANGS = ("python", "python3", "py", "py3", "")
_SH_LANGS = ("bash", "sh", "shell", "zsh")
_ONE_LINE_STRING = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")


def _message_text(message: dict) -> str:
    """The answer as the user sees it, without our earlier appendix or Open WebUI's details."""
    content = message.get("content", "")
    if isinstance(content, list):  # multimodal parts
        content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    if not isinstance(content, str):
        return ""
    content = content.split(APPENDIX_MARKER, 1)[0]
    return OPEN_WEBUI_DETAILS.sub("", content)


def _target_message(body: dict) -> Optional[dict]:
    """The message under which the button was pressed (body['id']), else the last answer."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    for m in messages:
        if body.get("id") and m.get("id") == body.get("id"):
            return m
    for m in reversed(messages):
        if m.get("role") == "assistant":
            return m
    return None


def reads_stdin(markdown: str) -> bool:
    """Whether a Python or shell code block of the answer reads standard input (a cheap look
    at the text, strings and comments left out: the server's plan is known only after the
    run)."""
    for m in _FENCE.finditer(markdown):
        info = (m.group(2).strip().split() or [""])[0].lower()
        # Without one-line strings (print("input(")) and comments.
        code = "\n".join(
            _ONE_LINE_STRING.sub("''", line).split("#", 1)[0] for line in m.group(3).splitlines()
        )
        if info in _PY_LANGS and _PY_STDIN.search(code):
            return True
        if info in _SH_LANGS and _SH_STDIN.search(code):
            return True
    return False


def _english_list(items: list) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _block(entry: dict) -> str:
    """Blocks are numbered from 1 for people (the API's `index` counts from 0)."""
    return f"block {int(entry.get('index', 0)) + 1} ({entry.get('language') or 'untagged'})"


_HEADER = re.compile(r"^--- block (\d+)\b[^\n]*---[ \t]*$", re.M)
_INSTALL = re.compile(r"^\s*(?:[%!]\s*)?(?:sudo\s+)?(?:pip3?|python3?\s+-m\s+pip)\s+install\b", re.M)


def people_numbered(text: str, steps: list, stream: str = "stdout") -> str:
    """The service's per-block header lines in joined output ("--- block 1 (bash, install)
    ---"), numbered from 1 as the summary and the entries are, and only for blocks that printed
    something. Whether a header's number is the API's 0-based index or already counts from 1
    is read from the text under it: it is the `stream` of the step with that index, or of the
    one before. Undecided by that, the numbers are 0-based when each is an index of `steps` and
    not each is an index + 1."""
    pieces = re.split(r"(^--- block \d+\b[^\n]*---[ \t]*$\n?)", text, flags=re.M)
    sections = [(int(_HEADER.match(h).group(1)), h, body)
                for h, body in zip(pieces[1::2], pieces[2::2])]
    by_index = {int(s.get("index", 0)): str(s.get(stream) or "").strip()
                for s in steps if isinstance(s, dict)}

    def printed_by(index: int, body: str) -> bool:
        said, body = by_index.get(index, ""), body.strip()
        return bool(said and body) and (body in said or said in body)

    zero = sum(printed_by(n, body) for n, _, body in sections)
    one = sum(printed_by(n - 1, body) for n, _, body in sections)
    numbers, indexes = {n for n, _, _ in sections}, set(by_index)
    from_zero = zero > one or (zero == one and bool(numbers) and (
        0 in numbers or (numbers <= indexes and not numbers <= {i + 1 for i in indexes})))

    def header(m):
        n = int(m.group(1)) + (1 if from_zero else 0)
        return m.group(0).replace(f"block {m.group(1)}", f"block {n}", 1)

    kept = [pieces[0]]
    for _, h, body in sections:
        if body.strip():
            kept.append(_HEADER.sub(header, h) + body)
    return "".join(kept)


def _installs(text: str) -> bool:
    """Whether the answer has a pip install line (a shell block, or %pip/!pip in Python)."""
    return _INSTALL.search(text) is not None


def _output_text(output: Any) -> str:
    """The text of an answer's `output` message items (Open WebUI 0.10), one per line, without
    this Action's own item; "" when there are none."""
    texts = []
    for item in output if isinstance(output, list) else []:
        if not isinstance(item, dict) or item.get("type") != "message":
            continue
        if str(item.get("id", "")).startswith(OUTPUT_ITEM_PREFIX):
            continue
        parts = item.get("content") if isinstance(item.get("content"), list) else []
        text = "".join(str(p.get("text") or "") for p in parts if isinstance(p, dict))
        if text.strip():
            texts.append(text)
    return "\n".join(texts)


def _output_item(item_id: str, text: str) -> dict:
    """An Open WebUI 0.10 `output` item of type message: what its chat shows of an answer
    (the shape its own middleware gives the model's text)."""
    return {
        "type": "message",
        "id": item_id,
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


class Action:
    class Valves(BaseModel):
        service_url: str = Field(
            default="http://127.0.0.1:8080",
            description="sandrun's address as Open WebUI's server reaches it (nginx in front of "
            "sandrund), e.g. http://127.0.0.1:8080 (same host) or http://host.docker.internal:8081",
        )
        token: str = Field(
            default="",
            description="Bearer token from sandrun's tokens_file",
            json_schema_extra={"input": {"type": "password"}},
        )
        wall_time_s: int = Field(
            default=30,
            description="Time limit of a run in seconds (wall-clock and CPU); 0 = the server's "
            "default",
        )
        memory_mb: int = Field(
            default=0, description="Memory limit of a run in MiB; 0 = the server's default"
        )
        network: bool = Field(
            default=False, description="Ask for outbound network access (the server may refuse)"
        )
        packages: str = Field(
            default="",
            description="Python packages every run can import, comma-separated (e.g. "
            "\"yfinance, pandas>=2\"): the server installs them once into a prepared "
            "environment and reuses it",
        )
        ask_for_input: bool = Field(
            default=True,
            description="When the answer's code reads input (input(), sys.stdin, read), ask "
            "the user for it before the run; off = run it with no input",
        )
        keep_images: bool = Field(
            default=True,
            description="Store the charts shown in the chat in Open WebUI's own file store (as "
            "its code interpreter does), so they outlive sandrun's expiring links; other files "
            "stay sandrun download links",
        )
        show_plan: bool = Field(
            default=False, description="Also list every code block found and why it ran or not"
        )
        max_output_chars: int = Field(
            default=8000,
            description="Longest output shown in the answer; the middle of longer output is cut",
        )
        priority: int = Field(
            default=0, description="Position of the button among the actions (lower = first)"
        )

    def __init__(self):
        self.valves = self.Valves()

    async def action(
        self,
        body: dict,
        __user__: Optional[dict] = None,
        __event_emitter__: Optional[Callable[[dict], Awaitable[Any]]] = None,
        __event_call__: Optional[Callable[[dict], Awaitable[Any]]] = None,
        __request__: Any = None,
        __metadata__: Optional[dict] = None,
    ) -> Optional[dict]:
        valves = self.valves
        message = _target_message(body or {})
        chat_id = str((body or {}).get("chat_id") or (__metadata__ or {}).get("chat_id") or "")
        message_id = str((message or {}).get("id") or (body or {}).get("id") or uuid.uuid4().hex)
        # From 0.10 the page shows the answer's `output` items; the body's `content` is only
        # their text as the page last had it (empty if the server alone saved the answer).
        shown = _output_text((await saved_message(chat_id, message_id) or {}).get("output"))
        text = _message_text({"content": shown} if shown else message or {})
        if not text.strip():
            await emit(
                __event_emitter__, status_event("Nothing to run: the answer is empty.", True)
            )
            return None

        payload = self._payload(text, __user__, chat_id)
        if valves.ask_for_input and __event_call__ is not None and reads_stdin(text):
            answer = await _ask_for_input(__event_call__)
            if answer:
                payload["stdin"] = answer

        # One code_execution entry per executed block. Which blocks run is known only from the
        # answer, so a first entry shows the run going on and becomes the first block's entry.
        first_id = f"sandrun-{message_id}-0"
        # The install runs first and usually takes longest: say so while it goes on.
        # (or builds the environment of the 'packages' valve, the first time)
        starting = (
            "Installing packages…"
            if _installs(text) or packages_list(valves.packages)
            else "Running the code in sandrun…"
        )
        await emit(__event_emitter__, status_event(starting, False))
        await emit(
            __event_emitter__,
            code_execution_event(first_id, "Running the code blocks…", "", "", None),
        )

        timeout = http_timeout(valves.wall_time_s)
        note = ""
        # While it runs, each block's entry shows its output so far (the run is streamed).
        live = LiveEntries(__event_emitter__)

        async def progress(steps: list) -> None:
            await live.show(self._live_entries(message_id, steps))

        try:
            reply = await call_sandrun(valves.service_url, valves.token, payload, timeout,
                                       progress)
            if "stdin" in payload and _refuses_field(reply, "stdin"):
                # A server that cannot give this run input: run it without, and say so.
                note = (
                    "The input you typed was not used: "
                    f"{reply.body['error'].get('message', 'the server refused it')}."
                )
                del payload["stdin"]
                reply = await call_sandrun(valves.service_url, valves.token, payload, timeout,
                                           progress)
        except Unreachable as e:
            return await self._fail(__event_emitter__, (chat_id, message_id), first_id, str(e),
                                    live)
        if reply.status != 200 or not isinstance(reply.body, dict) or "status" not in reply.body:
            return await self._fail(
                __event_emitter__, (chat_id, message_id), first_id,
                failure_sentence(reply, valves.service_url), live,
            )

        result = reply.body
        headline = _headline(result)
        where = {"chat_id": chat_id, "message_id": message_id}
        images = (
            await kept_images(result, __request__, __user__, where) if valves.keep_images else {}
        )
        entries = await self._emit_blocks(__event_emitter__, message_id, result, images)
        appendix = self._appendix(result, headline, images, note)
        await self._deliver(__event_emitter__, chat_id, message_id, appendix, entries)
        await emit(__event_emitter__, status_event(headline, True))
        return None

    def _payload(self, text: str, user: Optional[dict], chat_id: str) -> dict:
        """The POST /run request for the answer `text`, from the valves."""
        valves = self.valves
        payload: dict = {"markdown": text}
        if (user or {}).get("id"):
            payload["user"] = str(user["id"])
        if chat_id:
            payload["session"] = chat_id
        limits = limits_payload(valves.wall_time_s, valves.memory_mb)
        if limits:
            payload["limits"] = limits
        if valves.network:
            payload["network"] = True
        if packages_list(valves.packages):
            payload["packages"] = packages_list(valves.packages)
        return payload

    async def _deliver(self, emitter, chat_id: str, message_id: str, appendix: str,
                       entries: list) -> None:
        """The appendix where the chat shows it, for the browser now and in the saved chat.

        Open WebUI before 0.10 shows an answer's `content`: a `message` event appends to it
        (the server saves it, the page shows it). From 0.10 an answer made there has `output`
        items, and the page shows those instead of `content`: the appendix becomes an output
        item of its own, shown at once by a `chat:completion` event with the new `output` (as
        Open WebUI's code interpreter does) and saved with the message. The code execution
        entries are saved too (the server keeps only what the page saves otherwise)."""
        saved = await saved_message(chat_id, message_id)
        await emit(emitter, {"type": "message", "data": {"content": appendix}})
        fields: dict = {}
        output = (saved or {}).get("output")
        if isinstance(output, list) and output:
            kept = [
                item
                for item in output
                if not (isinstance(item, dict) and str(item.get("id", "")).startswith(
                    OUTPUT_ITEM_PREFIX))
            ]
            fields["output"] = kept + [_output_item(OUTPUT_ITEM_PREFIX + message_id, appendix)]
            await emit(emitter, {"type": "chat:completion", "data": {"output": fields["output"]}})
        if saved is not None:
            by_id = {e.get("id"): e for e in saved.get("code_executions") or []
                     if isinstance(e, dict)}
            by_id.update({e["id"]: e for e in entries})
            fields["code_executions"] = list(by_id.values())
            await save_message_fields(chat_id, message_id, fields)

    async def _fail(self, emitter, where: tuple, first_id: str, sentence: str,
                    live: Optional[LiveEntries] = None) -> None:
        """The run did not happen, or its result never came: the sentence in the entry, under
        the answer and as status. Entries of later blocks shown while it ran keep their output
        so far and say that the run did not finish."""
        result = {"output": "", "error": sentence, "files": []}
        entry = code_execution_event(first_id, "sandrun", "", "", result)
        await emit(emitter, entry)
        entries = [entry["data"]]
        for key, shown in (live.shown if live else {}).items():
            if key != first_id:
                data = dict(shown["data"], name=shown["data"]["name"].replace(RUNNING, ""))
                data["result"] = dict(data.get("result") or {"output": "", "files": []},
                                      error="The run did not finish.")
                await emit(emitter, {"type": "source", "data": data})
                entries.append(data)
        await self._deliver(emitter, where[0], where[1], f"{APPENDIX_MARKER}{sentence}\n",
                            entries)
        await emit(emitter, status_event(sentence, True))
        return None

    def _live_entries(self, message_id: str, steps: list) -> list:
        """The code execution entries of a run going on, one per block started, with the
        output so far; the entries of the result (_emit_blocks) replace them, id for id."""
        events = []
        for k, step in enumerate(steps):
            shown = live_output_text(step, self.valves.max_output_chars)
            name = _capital(_block(step)) + (RUNNING if step.get("status") is None else "")
            events.append(code_execution_event(
                f"sandrun-{message_id}-{k}", name, step.get("language") or "", "",
                {"output": shown, "error": "", "files": []} if shown else None,
            ))
        return events

    async def _emit_blocks(self, emitter, message_id: str, result: dict, images: dict) -> list:
        """One code execution entry per block run; returns the entries as emitted."""
        steps = result.get("snippets")
        if not isinstance(steps, list) or not steps:
            # No per-block results (a single program ran): one entry for the whole run, named
            # after the one block the plan ran, if it says so.
            ran = [e for e in result.get("plan") or [] if e.get("run")]
            single = ran[0] if len(ran) == 1 else {"index": 0, "language": ""}
            steps = [dict(result, index=single.get("index", 0), language=single.get("language"))]
        files = [
            {"name": f.get("name") or f.get("path"), "url": images.get(f.get("url"), f.get("url"))}
            for f in shown_images(result) + [
                f for f in result.get("files") or [] if f.get("mime") not in RASTER_IMAGE_TYPES
            ]
        ]
        limit = self.valves.max_output_chars
        entries = []
        for k, step in enumerate(steps):
            ok = step.get("status") == "ok"
            stdout, stderr = step.get("stdout") or "", step.get("stderr") or ""
            output = clip(without_shown_tables(stdout, result), limit)
            if ok and stderr:
                if output and not output.endswith("\n"):
                    output += "\n"
                output += "[stderr]\n" + clip(stderr, limit)
            error = ""
            if not ok:
                error = "\n".join(x for x in (clip(stderr, limit), _step_sentence(step)) if x)
            last = k == len(steps) - 1
            event = code_execution_event(
                f"sandrun-{message_id}-{k}",
                _capital(_block(step)) if step.get("language") else "Code",
                step.get("language") or "",
                step.get("code") or "",
                {
                    "output": output or ("(no output)" if ok else ""),
                    "error": error,
                    # Files belong to the whole run; they are listed with its last block.
                    "files": files if last else [],
                },
            )
            entries.append(event["data"])
            await emit(emitter, event)
        return entries

    def _appendix(self, result: dict, headline: str, images: dict, note: str = "") -> str:
        """The text appended to the answer."""
        parts = [APPENDIX_MARKER + headline]
        if note:
            parts.append(note)
        steps = result.get("snippets") or []
        # A table `displays` shows is not repeated as text.
        stdout = people_numbered(without_shown_tables(result.get("stdout") or "", result), steps)
        stderr = people_numbered(result.get("stderr") or "", steps, "stderr")
        if stdout.strip():
            parts.append(fenced(clip(stdout, self.valves.max_output_chars)))
        if stderr.strip():
            parts.append("stderr:\n" + fenced(clip(stderr, self.valves.max_output_chars)))
        displays = displays_markdown(result, images)
        if not stdout.strip() and not stderr.strip() and not displays:
            parts.append("_(no output)_")
        # What the program showed (plt.show(), a trailing DataFrame), in order; then the files
        # it saved that were not among them.
        parts.extend(displays)
        shown = displayed_urls(result)
        files = [f for f in result.get("files") or [] if f.get("url") not in shown]
        parts.extend(
            file_markdown(dict(f, url=images.get(f.get("url"), f.get("url"))))
            for f in files
            if f.get("mime") in RASTER_IMAGE_TYPES
        )
        others = [file_markdown(f) for f in files if f.get("mime") not in RASTER_IMAGE_TYPES]
        if others:
            parts.append("\n".join("- " + o for o in others))
        skipped = skipped_files_line(result)
        if skipped:
            parts.append(skipped)
        blocks = _blocks_line(result)
        if blocks:
            parts.append(blocks)
        if self.valves.show_plan and result.get("plan"):
            parts.append(_plan_table(result["plan"]))
        return "\n\n".join(parts) + "\n"


async def _ask_for_input(event_call) -> str:
    """What the user types for the program's standard input ("" if nothing, cancelled, or no
    browser tab answered): Open WebUI's input dialog (an `input` event call)."""
    try:
        answer = await event_call(
            {
                "type": "input",
                "data": {
                    "title": "This code reads input",
                    "message": "Type what the program should read from its standard input, one "
                    "line per answer it asks for. Leave it empty or cancel to run it without "
                    "input.",
                    "placeholder": "e.g. 42",
                },
            }
        )
    except Exception:
        return ""
    if not isinstance(answer, str) or not answer.strip():
        return ""
    return answer if answer.endswith("\n") else answer + "\n"


def _refuses_field(reply: Reply, field: str) -> bool:
    error = reply.body.get("error") if isinstance(reply.body, dict) else None
    return reply.status == 400 and isinstance(error, dict) and error.get("field") == field


def _step_sentence(step: dict) -> str:
    status = step.get("status")
    if status == "error":
        if step.get("exit_code") is None:
            return "It raised an error (the traceback is above)."
        return f"Exit code {step.get('exit_code')}."
    if status == "killed":
        return f"Killed by signal {step.get('signal')} ({signal_name(step.get('signal'))})."
    if status == "timeout":
        return "Stopped: time limit reached."
    if status == "memory_limit":
        return "Stopped: memory limit reached."
    if status == "output_limit":
        return "Stopped: output limit reached."
    return f"Status: {status}." if status and status != "ok" else ""


def _headline(result: dict) -> str:
    """outcome_sentence, naming the failing block when the answer had several."""
    sentence = outcome_sentence(result)
    steps = result.get("snippets") or []
    failed = [s for s in steps if s.get("status") not in (None, "ok")]
    if result.get("status") == "error" and failed and result.get("plan") is not None:
        step = failed[0]
        if step.get("exit_code") is None:  # a block run in an interpreter: a traceback
            sentence = f"{_capital(_block(step))} raised an error."
        else:
            sentence = f"{_capital(_block(step))} failed with exit code {step.get('exit_code')}."
    return sentence


def _blocks_line(result: dict) -> str:
    """One line naming the blocks run, not reached and skipped, from `plan` and `snippets`."""
    plan = result.get("plan")
    if not isinstance(plan, list) or not plan:
        return ""
    steps = result.get("snippets") or []
    # Without per-block results, what the plan chose is what ran.
    ran_indexes = {s.get("index") for s in steps} if steps else {e.get("index") for e in plan}
    ran = [_block(e) for e in plan if e.get("run") and e.get("index") in ran_indexes]
    unreached = [_block(e) for e in plan if e.get("run") and e.get("index") not in ran_indexes]
    skipped = [
        f"block {int(e.get('index', 0)) + 1} ({e.get('language') or 'untagged'}, "
        f"{e.get('reason') or 'not runnable'})"
        for e in plan
        if not e.get("run")
    ]
    clauses = []
    if ran:
        clauses.append("Ran " + _english_list(ran))
    if unreached:
        clauses.append("did not reach " + _english_list(unreached) + " after the failure")
    if skipped:
        clauses.append("skipped " + _english_list(skipped))
    line = "; ".join(clauses)
    return (line[0].upper() + line[1:] + ".") if line else ""


def _plan_table(plan: list) -> str:
    rows = ["| block | language | runs | why |", "|---|---|---|---|"]
    for e in plan:
        why = str(e.get("reason") or "").replace("|", "\\|")
        rows.append(
            f"| {int(e.get('index', 0)) + 1} | {e.get('language') or '-'} | "
            f"{'yes' if e.get('run') else 'no'} | {why} |"
        )
    return "\n".join(rows)
