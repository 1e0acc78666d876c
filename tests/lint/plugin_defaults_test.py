#!/usr/bin/env python3
"""lint.PluginDefaults: the Open WebUI plugins' default service_url is sandrun's address in
README's first Open WebUI setup (Open WebUI on the same host, --network=host), which is also
where scripts/serve, scripts/install and the .deb listen: http://127.0.0.1:8080. A default
that fits no setup (http://sandrun:8080 once) makes a pasted plugin fail until edited.

Usage: plugin_defaults_test.py REPO
"""

import re
import sys

EXPECTED = "http://127.0.0.1:8080"


def main(repo):
    bad = []
    for name in ("sandrun_action.py", "sandrun_tool.py"):
        path = "%s/openwebui/%s" % (repo, name)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        m = re.search(r'service_url:\s*str\s*=\s*Field\(\s*default="([^"]*)"', text)
        if m is None:
            bad.append("%s: no `service_url: str = Field(default=...)` found" % path)
        elif m.group(1) != EXPECTED:
            bad.append("%s: default service_url is %s, not %s" % (path, m.group(1), EXPECTED))
    for line in bad:
        print("FAIL: " + line)
    if not bad:
        print("ok: both plugins default to service_url %s" % EXPECTED)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
