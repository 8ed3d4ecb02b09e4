#!/bin/sh
# approvals.notify for a chat webhook (Slack, Mattermost, Rocket.Chat: {"text": ...}).
#
#   "approvals": {"notify": {"command": ["/usr/local/lib/rexec/webhook.sh",
#                                        "/etc/rexec/webhook-url"], "timeout_s": 10}}
#
# rexec serve runs it for each new challenge, with the challenge's JSON (secret-free, already
# through the workspace's redactor) on stdin; docs/workspace.md, "approvals". Its argument is a
# FILE holding the webhook's URL (one line, mode 0600, owned by serve's user): a URL given as an
# argument would show in ps. serve gives it PATH and HOME only, kills it at timeout_s, and logs
# and counts a failure (a non-zero exit) without failing any call.
set -eu
url_file=${1:?usage: webhook.sh URL_FILE (the webhook URL, one line)}
url=$(head -n 1 -- "$url_file")
case $url in
https://* | http://*) ;;
*) echo "webhook.sh: $url_file does not hold an http(s) URL" >&2; exit 2 ;;
esac
# the message: who asks for what, where, and how to decide
python3 -c '
import json, sys
c = json.load(sys.stdin)
who = (c.get("requester") or {}).get("user") or "rexec"
text = "%s asks to run %s (%s) on %s: %s\nchallenge %s, expires %s\napprove: rexec approve %s   deny: rexec deny %s --reason ..." % (
    who, c.get("action"), c.get("risk"), ", ".join(c.get("hosts") or []),
    (c.get("script") or "")[:500], c.get("challenge_id"), c.get("expires"),
    c.get("challenge_id"), c.get("challenge_id"))
print(json.dumps({"text": text}))
' | curl --silent --show-error --fail --max-time 8 --proto '=https,http' \
    -H 'Content-Type: application/json' --data-binary @- -o /dev/null -- "$url"
