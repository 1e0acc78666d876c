"""What the Open WebUI tests share: where the plugin files are, and reading links and files
out of what a plugin answered."""

import os
import re
import urllib.request

REPO = os.environ.get("SANDRUN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..")
)
ACTION_FILE = os.path.join(REPO, "openwebui", "sandrun_action.py")
TOOL_FILE = os.path.join(REPO, "openwebui", "sandrun_tool.py")

MD_LINK = re.compile(r"(!?)\[([^\]]+)\]\((<[^>]+>|[^)\s]+)\)")


def fetch(url: str) -> tuple:
    """(status, Content-Type, body) of a GET of url."""
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read()


def markdown_links(text: str) -> dict:
    """name -> (is_image, url) for every markdown link or image in text."""
    return {m.group(2): (m.group(1) == "!", m.group(3).strip("<>")) for m in MD_LINK.finditer(text)}
