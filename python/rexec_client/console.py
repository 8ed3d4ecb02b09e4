"""rexec approvals watch: a live console for an operator at a terminal (docs/gate.md,
"Approvers on serve"). Standard library only, plain ANSI (no curses).

    rexec approvals watch --socket /run/rexec/rexec.sock     (as the approver account)

The pending list follows serve's watch op as challenges come and go. Keys: up/down (or k/j)
choose, Enter shows the whole challenge (script, parameters, risk, reason), `a` approves after
the operator types back the code the console shows (as `rexec approve` asks), `d` denies with a
reason, Esc goes back, `q` quits. The terminal is read and written through /dev/tty, never
stdin/stdout (a pipe cannot approve), and restored however the console ends (q, a signal, an
error). Every string shown went through serve's redactor and is shown with visible(): a value
cannot move the cursor, recolour the screen or hide a character.
"""
import os
import queue
import secrets
import signal
import sys
import termios
import select
import threading
import time

from ._proto import RexecError
from .approver import Approver, script_segments, visible

CODE_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford's base32, as the prompt's codes
TEXT_MAX = 1024
RETRY_S = 2


def new_code():
    c = "".join(secrets.choice(CODE_ALPHABET) for _ in range(6))
    return c[:3] + "-" + c[3:]


class Terminal:
    """/dev/tty in cbreak mode, no echo, on the alternate screen; restore() puts it back."""

    def __init__(self):
        self.fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
        if not os.isatty(self.fd):
            raise OSError("/dev/tty is not a terminal")
        self.saved = termios.tcgetattr(self.fd)
        mode = termios.tcgetattr(self.fd)
        mode[3] &= ~(termios.ICANON | termios.ECHO | termios.ISIG)  # Ctrl-C comes as a key
        mode[6][termios.VMIN], mode[6][termios.VTIME] = 1, 0
        termios.tcsetattr(self.fd, termios.TCSAFLUSH, mode)
        self.write("\x1b[?1049h\x1b[?25l")
        self.restored = False

    def write(self, s):
        data = s.encode("utf-8", "replace")
        while data:
            n = os.write(self.fd, data)
            data = data[n:]

    def size(self):
        try:
            sz = os.get_terminal_size(self.fd)
            return max(sz.columns, 20), max(sz.lines, 6)
        except OSError:
            return 80, 24

    def restore(self):
        if self.restored:
            return
        self.restored = True
        try:
            self.write("\x1b[0m\x1b[?25h\x1b[?1049l")
            termios.tcsetattr(self.fd, termios.TCSAFLUSH, self.saved)
        finally:
            os.close(self.fd)


def cut(s, width):
    """s (already visible()) cut to width columns."""
    return s if len(s) <= width else s[:max(width - 1, 0)] + "…"


def wrap_plain(line, width, indent=14):
    """line (visible() text) in rows of at most width characters, continued under its value."""
    width = max(width, indent + 10)
    rows = [line[:width]]
    rest = line[width:]
    while rest:
        rows.append(" " * indent + rest[:width - indent])
        rest = rest[width - indent:]
    return rows


def wrap_script(segs, width):
    """The script's pieces as lines of at most width characters, indented by 4, parameters in
    yellow and secrets in magenta (visible() already made every newline a \\n: one line in)."""
    lines, line, room = [], "    ", max(width, 10)
    for g in segs:
        colour = {"param": "\x1b[33m", "secret": "\x1b[35m"}.get(g["kind"], "")
        text = g["text"]
        while text:
            take = text[:room]
            text = text[room:]
            line += colour + take + ("\x1b[0m" if colour else "")
            room -= len(take)
            if room == 0:
                lines.append(line)
                line, room = "    ", max(width, 10)
    if line.strip() or not lines:
        lines.append(line)
    return lines


class Console:
    def __init__(self, approver, term):
        self.ap = approver
        self.t = term
        self.pending = {}       # id -> challenge object, in arrival order
        self.sel = 0
        self.scroll = 0         # the detail view's first line
        self.view = "list"      # list | detail
        self.prompt = None      # {"kind": "code"|"comment"|"reason", "label", "text", "id", ...}
        self.status = "connecting to rexec serve..."
        self.events = queue.Queue()
        self.wake_r, self.wake_w = os.pipe()
        self.connected = False

    # ---- serve's watch, on a thread of its own ----------------------------------------------
    def watch_thread(self):
        """Follows serve's watch; when it ends (serve restarted or stopped), says so and watches
        again every RETRY_S seconds: each new watch starts with what is pending then, so the
        list is replaced, not added to."""
        while True:
            self.events.put("reset")
            try:
                os.write(self.wake_w, b"r")
                for ev in self.ap.watch(idle_s=None):
                    self.events.put(ev)
                    os.write(self.wake_w, b"e")
                err = RexecError("rexec serve closed the watch", 255)
            except (RexecError, ValueError) as e:
                err = e if isinstance(e, RexecError) else RexecError(str(e), 74)
            self.events.put(err)
            try:
                os.write(self.wake_w, b"e")
            except OSError:
                return
            time.sleep(RETRY_S)  # serve is away: try again at a human pace

    def take_events(self):
        while True:
            try:
                ev = self.events.get_nowait()
            except queue.Empty:
                return
            if ev == "reset":
                self.pending.clear()
                continue
            if isinstance(ev, RexecError):
                self.status = "watch ended: %s (trying again; q quits)" % visible(ev.message)
                self.connected = False
                continue
            self.connected = True
            if ev.get("type") == "watching":
                self.status = "watching" if self.status.startswith(("connecting", "watch ended")) \
                    else self.status
                continue
            kind = ev.get("event")
            if kind == "approval_pending" and isinstance(ev.get("challenge"), dict):
                c = ev["challenge"]
                self.pending[str(c.get("challenge_id"))] = c
            elif kind in ("approval_decided", "approval_expired"):
                cid = str(ev.get("challenge_id"))
                if self.pending.pop(cid, None) is not None and kind == "approval_expired":
                    self.status = "%s expired" % visible(cid)
                elif kind == "approval_decided" and ev.get("decision") != "withdrawn":
                    self.status = "%s %s (by %s via %s)" % (
                        visible(ev.get("decision")), visible(cid), visible(ev.get("by")),
                        visible(ev.get("via")))
                if self.prompt and self.prompt.get("id") == cid:
                    self.prompt = None
                    self.status = "%s was decided meanwhile: %s" % (visible(cid), visible(kind))
        ids = list(self.pending)
        self.sel = min(self.sel, max(len(ids) - 1, 0))
        if self.view == "detail" and not ids:
            self.view = "list"

    # ---- drawing ------------------------------------------------------------------------------
    def selected(self):
        ids = list(self.pending)
        return (ids[self.sel], self.pending[ids[self.sel]]) if ids else (None, None)

    def draw(self):
        w, h = self.t.size()
        out = ["\x1b[H\x1b[2J"]
        title = "rexec approvals: %d pending%s" % (len(self.pending),
                                                    "" if self.connected else " (not connected)")
        out.append("\x1b[1m%s\x1b[0m\r\n" % cut(title, w))
        room = h - 4
        if self.view == "detail":
            lines = self.detail_lines(w)
            if len(lines) <= room:
                self.scroll = 0
            else:  # the operator must be able to read all of it: a scroll line says there is more
                body = room - 1
                self.scroll = max(0, min(self.scroll, len(lines) - body))
                lines = lines[self.scroll:self.scroll + body] + [
                    "\x1b[7m  -- lines %d-%d of %d: j/k scroll --" % (
                        self.scroll + 1, self.scroll + body, len(lines))]
        else:
            lines = self.list_lines(w, room)
        for ln in lines[:room]:
            out.append(ln + "\x1b[0m\r\n")
        out.append("\x1b[%d;1H" % (h - 1))
        out.append("\x1b[7m%s\x1b[0m" % cut(self.status, w).ljust(w)[:w])
        out.append("\x1b[%d;1H" % h)
        if self.prompt:
            p = self.prompt
            line = p["label"] + visible(p["text"])
            if len(line) > w - 1:  # what is being typed stays in view
                line = "…" + line[len(line) - (w - 2):]
            out.append(line + "\x1b[?25h")
        else:
            keys = ("Enter: details  a: approve  d: deny  j/k: move  q: quit" if self.view == "list"
                    else "a: approve  d: deny  j/k: scroll  Esc: back  q: quit")
            out.append(cut(keys, w) + "\x1b[?25l")
        self.t.write("".join(out))

    def list_lines(self, w, room):
        if not self.pending:
            return ["", "  no pending approvals"]
        lines = ["  %-19s %-24s %-20s %-4s %s" % ("ID", "ACTION", "HOSTS", "RISK", "REQUESTER")]
        rows = max(room - 1, 1)
        first = max(0, min(self.sel - rows + 1, len(self.pending) - rows)) if self.sel >= rows else 0
        for i, (cid, c) in enumerate(self.pending.items()):
            if i < first or i >= first + rows:
                continue
            req = c.get("requester") if isinstance(c.get("requester"), dict) else {}
            row = "%s %-19s %-24s %-20s %-4s %s" % (
                ">" if i == self.sel else " ", visible(cid), cut(visible(c.get("action")), 24),
                cut(visible(",".join(map(str, c.get("hosts") or []))), 20),
                visible(c.get("risk")), visible(req.get("user")) if req else "-")
            row = cut(row, w)
            lines.append("\x1b[7m%s" % row if i == self.sel else row)
        return lines

    def detail_lines(self, w):
        cid, c = self.selected()
        if c is None:
            return ["", "  no pending approvals"]
        req = c.get("requester") if isinstance(c.get("requester"), dict) else None
        stdin = c.get("stdin") if isinstance(c.get("stdin"), dict) else None
        params = c.get("params") if isinstance(c.get("params"), dict) else {}
        names = [s for s in c.get("secrets") or [] if isinstance(s, str)]
        rows = [("id:", cid), ("hosts:", ", ".join(map(str, c.get("hosts") or []))),
                ("action:", c.get("action")),
                ("risk:", "%s (%s)" % (c.get("risk"), c.get("reason"))),
                ("requester:", "%s (uid %s)" % (req.get("user"), req.get("uid")) if req else
                 "outside serve"),
                ("request:", c.get("request_id")), ("created:", c.get("created")),
                ("expires:", c.get("expires")),
                ("stdin:", "%s bytes, sha256 %s" % (stdin.get("bytes"), stdin.get("sha256"))
                 if stdin else "none (/dev/null)")]
        lines = [""] + ["  %-11s %s" % (k, visible(v)) for k, v in rows]
        if not params:
            lines.append("  %-11s none" % "params:")
        for i, (k, v) in enumerate(sorted(params.items())):
            lines.append("  %-11s %s=%s" % ("" if i else "params:", visible(k), visible(v)))
        lines.append("  %-11s %s" % ("secrets:", ", ".join(visible(s) for s in names) +
                                      " (by name; values are never shown)" if names else "none"))
        lines.append("  script:")
        scripts = c.get("scripts") if isinstance(c.get("scripts"), dict) else {}
        for host, text in [(None, c.get("script"))] + sorted(scripts.items()):
            if host is not None:
                lines.append("  script on %s:" % visible(host))
            lines += wrap_script(script_segments(text, params, names), w - 4)
        out = []
        for ln in lines:  # nothing is cut: what is approved is read whole
            out += [ln] if "\x1b[" in ln else wrap_plain(ln, w)
        return out

    # ---- keys ---------------------------------------------------------------------------------
    def start_prompt(self, kind):
        cid, c = self.selected()
        if c is None:
            self.status = "nothing to decide"
            return
        self.view, self.scroll = "detail", 0  # what is decided on is on the screen while deciding
        if kind == "code":
            code = new_code()
            self.prompt = {"kind": "code", "id": cid, "code": code, "text": "",
                           "label": "type the code %s: " % code}
            self.status = ("approving %s: type the code and press Enter (anything else refuses, "
                           "Esc cancels)" % cid)
        else:
            self.prompt = {"kind": "reason", "id": cid, "text": "", "label": "reason: "}
            self.status = "denying %s: say why, Enter sends, Esc cancels" % cid

    def prompt_done(self):
        p, self.prompt = self.prompt, None
        if p["kind"] == "code":
            if p["text"].strip() != p["code"]:
                self.status = "wrong code: %s not approved" % p["id"]
                return
            self.prompt = {"kind": "comment", "id": p["id"], "text": "",
                           "label": "comment (optional): "}
            self.status = "approving %s: a comment for the record, Enter sends" % p["id"]
            return
        try:
            if p["kind"] == "comment":
                r = self.ap.approve(p["id"], p["text"] or None)
                self.status = "approved %s for %s" % (
                    p["id"], visible(", ".join(map(str, r.get("hosts") or []))))
            else:
                self.ap.deny(p["id"], p["text"] or None)
                self.status = "denied %s" % p["id"]
            self.pending.pop(p["id"], None)
            self.view = "list"
            self.sel = min(self.sel, max(len(self.pending) - 1, 0))
        except RexecError as e:
            self.status = "not done: %s" % visible(e.message)

    def key_prompt(self, k):
        p = self.prompt
        if k in ("\r", "\n"):
            self.prompt_done()
        elif k == "\x1b" or k == "\x03":
            self.prompt = None
            self.status = "cancelled: nothing decided"
        elif k in ("\x7f", "\x08"):
            p["text"] = p["text"][:-1]
        elif k == "\x15":
            p["text"] = ""
        elif len(k) == 1 and k >= " " and len(p["text"].encode()) < TEXT_MAX:
            p["text"] += k

    def key(self, k):
        """None, or the exit status when the console is to end (q: 0, Ctrl-C: 130)."""
        if self.prompt is not None:
            self.key_prompt(k)
            return None
        n = len(self.pending)
        if k in ("q", "Q", "\x04"):
            return 0
        if k == "\x03":
            return 130
        if k in ("\x1b[A", "k") and self.view == "detail":
            self.scroll = max(self.scroll - 1, 0)
        elif k in ("\x1b[B", "j") and self.view == "detail":
            self.scroll += 1  # bounded when drawn
        elif k in ("\x1b[A", "k") and n:
            self.sel = (self.sel - 1) % n
        elif k in ("\x1b[B", "j") and n:
            self.sel = (self.sel + 1) % n
        elif k in ("\r", "\n"):
            self.view = "detail" if n else "list"
            self.scroll = 0
        elif k in ("\x1b", "\x7f", "h"):
            self.view = "list"
        elif k == "a":
            self.start_prompt("code")
        elif k == "d":
            self.start_prompt("reason")
        return None

    # ---- the loop -----------------------------------------------------------------------------
    def keys(self, data):
        """Splits what the terminal sent into keys: an arrow's escape sequence is one key."""
        text = data.decode("utf-8", "replace")
        i = 0
        while i < len(text):
            if text.startswith("\x1b[", i) and i + 2 < len(text):
                yield text[i:i + 3]
                i += 3
            else:
                yield text[i]
                i += 1

    def run(self):
        threading.Thread(target=self.watch_thread, daemon=True).start()
        self.draw()
        while True:
            r, _, _ = select.select([self.t.fd, self.wake_r], [], [])
            if self.wake_r in r:
                os.read(self.wake_r, 4096)
                if STOP["sig"]:
                    return 128 + STOP["sig"]
                self.take_events()
            if self.t.fd in r:
                data = os.read(self.t.fd, 1024)
                if not data:
                    return 0
                for k in self.keys(data):
                    status = self.key(k)
                    if status is not None:
                        return status
            self.draw()


STOP = {"sig": 0}


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(prog="rexec approvals watch", description=__doc__.splitlines()[0])
    ap.add_argument("--socket", default=os.environ.get("REXEC_SOCKET"), metavar="PATH")
    a = ap.parse_args(argv)
    if not a.socket:
        print("rexec: approvals watch: no serve socket: --socket PATH or $REXEC_SOCKET",
              file=sys.stderr)
        return 64
    approver = Approver(a.socket)
    try:
        approver.approvals()  # reachable, and this user may see approvals: say so before the screen
    except RexecError as e:
        print("rexec: approvals watch: %s" % e.message, file=sys.stderr)
        return e.exit_status
    try:
        term = Terminal()
    except OSError as e:
        print("rexec: approvals watch needs an operator at a terminal, and this process has none "
              "(/dev/tty: %s)" % (e.strerror or e), file=sys.stderr)
        return 77
    con = Console(approver, term)

    def on_signal(sig, _frame):
        STOP["sig"] = sig
        try:
            os.write(con.wake_w, b"s")
        except OSError:
            pass
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, on_signal)
    signal.signal(signal.SIGWINCH, lambda *_: os.write(con.wake_w, b"w"))
    try:
        return con.run()
    finally:
        term.restore()


if __name__ == "__main__":
    sys.exit(main())
