#!/usr/bin/env python3
"""A headless Chromium driven through the DevTools protocol, one command a line on stdin, one
answer a line on stdout (for a test's bash `coproc`). Standard library only: the WebSocket client
below speaks just what DevTools needs (RFC 6455 text frames, masked from the client).

    open URL            navigate the page, wait for its load event        -> ok
    eval EXPR           Runtime.evaluate (promises awaited), JSON value    -> ok VALUE | err MSG
    wait SECONDS EXPR   eval EXPR until it is truthy (bounded)             -> ok VALUE | err timeout
    shot FILE           a PNG of the page                                  -> ok
    quit

Chromium runs with --headless --no-sandbox (the tests run as root), its own profile directory,
and DevTools on 127.0.0.1 on a port it picks (read back from DevToolsActivePort).
Usage: cdp.py PROFILE_DIR [WIDTH HEIGHT]
"""
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request


class WebSocket:
    def __init__(self, url, timeout=60):
        assert url.startswith("ws://")
        hostport, _, path = url[5:].partition("/")
        host, _, port = hostport.partition(":")
        self.s = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall(("GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                        "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n"
                        % (path, hostport, key)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            d = self.s.recv(1)
            if not d:
                raise OSError("websocket: no handshake")
            head += d
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise OSError("websocket: refused: %r" % head[:200])

    def send(self, text):
        data = text.encode()
        hdr = bytearray([0x81])
        n = len(data)
        if n < 126:
            hdr.append(0x80 | n)
        elif n < 65536:
            hdr.append(0x80 | 126)
            hdr += n.to_bytes(2, "big")
        else:
            hdr.append(0x80 | 127)
            hdr += n.to_bytes(8, "big")
        mask = os.urandom(4)
        hdr += mask
        self.s.sendall(bytes(hdr) + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _exact(self, n):
        buf = b""
        while len(buf) < n:
            d = self.s.recv(n - len(buf))
            if not d:
                raise OSError("websocket closed")
            buf += d
        return buf

    def recv(self):
        msg = b""
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = int.from_bytes(self._exact(2), "big")
            elif n == 127:
                n = int.from_bytes(self._exact(8), "big")
            mask = self._exact(4) if b1 & 0x80 else None
            data = self._exact(n)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            op = b0 & 0x0F
            if op == 8:
                raise OSError("websocket closed by the browser")
            if op in (9, 10):
                continue  # ping/pong: not sent by DevTools in practice
            msg += data
            if b0 & 0x80:
                return msg.decode()


class Browser:
    def __init__(self, profile, width=1100, height=900):
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if not exe:
            raise SystemExit("cdp: no chromium")
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
             "--disable-sync", "--disable-component-update", "--password-store=basic",
             "--disable-breakpad", "--disable-crash-reporter",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
             "--user-data-dir=" + profile, "--window-size=%d,%d" % (width, height), "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(profile, "..", "chromium.log"), "ab"))
        try:
            self._connect(profile)
        except BaseException:
            self.proc.kill()  # a failed or interrupted start leaves no browser behind
            self.proc.wait()
            raise

    def _connect(self, profile):
        port_file = os.path.join(profile, "DevToolsActivePort")
        deadline = time.time() + 60
        while True:
            if self.proc.poll() is not None:
                raise SystemExit("cdp: chromium exited with %s" % self.proc.returncode)
            try:
                port = int(open(port_file).read().split()[0])
                targets = json.load(urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port,
                                                           timeout=10))
                page = [t for t in targets if t.get("type") == "page"]
                if page:
                    break
            except (OSError, ValueError, IndexError):
                pass
            if time.time() > deadline:
                raise SystemExit("cdp: chromium's DevTools did not come up in 60 s")
            time.sleep(0.1)  # polling for the browser's start, bounded above
        self.ws = WebSocket(page[0]["webSocketDebuggerUrl"])
        self.n = 0
        self.events = []
        self.call("Page.enable")
        self.call("Runtime.enable")

    def call(self, method, **params):
        self.n += 1
        me = self.n
        self.ws.send(json.dumps({"id": me, "method": method, "params": params}))
        while True:
            m = json.loads(self.ws.recv())
            if m.get("id") == me:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"].get("message")))
                return m.get("result", {})
            if "method" in m:
                self.events.append(m)

    def wait_event(self, name, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            for i, e in enumerate(self.events):
                if e["method"] == name:
                    del self.events[: i + 1]
                    return e
            m = json.loads(self.ws.recv())
            if "method" in m:
                self.events.append(m)
        raise RuntimeError("no %s in %s s" % (name, timeout))

    def open(self, url):
        self.events.clear()
        self.call("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError("exception: %s" % json.dumps(r["exceptionDetails"].get("exception", {})
                                                            .get("description") or r["exceptionDetails"]))
        return r.get("result", {}).get("value")

    def wait(self, seconds, expr):
        deadline = time.time() + seconds
        while True:
            v = self.eval(expr)
            if v:
                return v
            if time.time() > deadline:
                raise RuntimeError("timeout after %s s: %s" % (seconds, expr))
            time.sleep(0.1)  # polling a condition, bounded by the deadline

    def shot(self, path):
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        try:
            self.call("Browser.close")
        except (OSError, RuntimeError, ValueError):
            pass
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main():
    import signal
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the browser is closed on the way out
    profile = sys.argv[1]
    os.makedirs(profile, exist_ok=True)
    size = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else (1100, 900)
    b = Browser(profile, *size)
    print("ok ready", flush=True)
    try:
        for line in sys.stdin:
            cmd, _, arg = line.rstrip("\n").partition(" ")
            try:
                if cmd == "quit":
                    break
                if cmd == "open":
                    b.open(arg)
                    out = None
                elif cmd == "eval":
                    out = b.eval(arg)
                elif cmd == "wait":
                    secs, _, expr = arg.partition(" ")
                    out = b.wait(float(secs), expr)
                elif cmd == "shot":
                    b.shot(arg)
                    out = None
                else:
                    raise RuntimeError("unknown command %s" % cmd)
                print("ok %s" % json.dumps(out), flush=True)
            except (RuntimeError, OSError, ValueError) as e:
                print("err %s" % str(e).replace("\n", " "), flush=True)
    finally:
        b.close()


if __name__ == "__main__":
    main()
