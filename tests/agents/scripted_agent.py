"""A scripted ACP agent for tests: plays a JSON scenario over real stdio.

Stdlib only, and written without any of acp-kernel's code, so the client is
tested against a peer that does not share its assumptions. Usage::

    python scripted_agent.py '<scenario JSON>'   (or a path to a JSON file)

Scenario keys (all optional):
  init            dict merged into the initialize result
  init_actions    actions run before answering initialize
  new_session     {"error": {...}} to refuse, or a dict merged into the result
  before_new      actions run before answering session/new (updates for the
                  new session id arrive before its response)
  prompt          actions run for each session/prompt (default: one chunk)
  prompts         {"exact prompt text": actions} overriding ``prompt``
  after_prompt    actions run right after answering a prompt
  on_cancel       "end" (default: end the turn with cancelled) or "ignore"
  ignore_eof      true: keep running after stdin closes (like real agents)
  request_ids     "int" (from 0, default) or "uuid"
  load            true: advertise loadSession and replay ``history`` on load
  replay_after    seconds: answer session/load first, then replay ``history``
                  one update each that many seconds (as Gemini CLI does)
  resume          true: advertise sessionCapabilities.resume and answer session/resume
  config_options  list offered as configOptions by session/new, load and resume;
                  session/set_config_option sets an option's currentValue
                  (unknown id or value: error -32602), answers the whole list
                  and sends a config_option_update (OpenCode offers its modes so)
  modes           {"currentModeId", "availableModes"} offered likewise;
                  session/set_mode switches (unknown id: error) and sends a
                  current_mode_update
  models          {"currentModelId", "availableModels"} (unstable) likewise,
                  switched by session/set_model
  record          a path: every message read from stdin is appended to it as
                  one JSON line (a wire recording for schema checks), and each
                  request this agent sends as {"agent_request": message}

Actions (one key each):
  {"update": {...}}        session/update for the current session ("$TERM": the
                           terminalId the client last created)
  {"chunk": "text"}        an agent_message_chunk
  {"raw": "text"}          write this line as is (noise; $SID replaced)
  {"raw_b64": "..."}       write these bytes as is (garbage, invalid UTF-8)
  {"big_line": N}          a JSON-RPC notification line of about N bytes
  {"burst": N}             N agent_message_chunk notifications "0 1 2 ..."
  {"request": {method, params}}  ask the client; report the answer as a
                           chunk "RESULT <json>" or "ERROR <json>" ("$TERM" in
                           params: the terminalId the client last created)
  {"send": {...}}          send this JSON message as is ($SID replaced)
  {"round_trip": "method"} ask the client this method (e.g. an unknown one) and wait
                           for its answer, reporting nothing: the client has then
                           read everything sent before (its notifications are
                           handled in order, before the request)
  {"stderr": "text"}       log to stderr
  {"stderr_flood": N}      write N bytes of log lines to stderr
  {"sleep": seconds}
  {"wait_cancel": true}    block until session/cancel arrives
  {"stop": "end_turn"}     answer the prompt now with this stop reason
  {"exit": code}           exit at once
  {"spawn": "sleep 1000"}  start a child process (same group); report its pid
  {"spawn_detached": "..."} same, in a new session (escapes the group)
  {"reply_prompt": {...}}  send a response to the current prompt's id with
                           these members (e.g. {"result": {...}}), unguarded:
                           a duplicate or malformed answer
  {"request_raw": {method, params?}}  like "request", but params are sent
                           exactly as given (any JSON, or absent)
  {"signal": 9}            send this signal to the agent itself (SIGKILL...)
  {"close_stdout": true}   close stdout (the wire) and keep running
  {"deep": {"depth": N, "as": "update"|"request"|"prompt_answer", "method": M}}
                           a message nested exactly N levels deep (built as
                           text: json itself cannot write 2,000 levels): an
                           agent_message_chunk "DEEP<N> ", a request (its
                           answer reported like "request"), or the prompt's answer
  {"noise_flood": N}       N non-JSON lines "noise line <i>" on stdout
  {"stop_reading": true}   stop reading stdin from now on (the pipe fills up)
  {"resume_reading": true} read stdin again

Scenario keys for hangs:
  never_answer    list of methods never answered (e.g. ["initialize"])
  answer_delay    {"method": seconds}: answer that method after a delay
  responses       {"method": result}: answer any other method with this
                  result ($SID replaced), e.g. session/list or set_mode; with
                  ``init`` advertising them: session/close, session/delete, logout
  errors          {"method": error}: answer that method with this JSON-RPC error
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
import uuid

_write_lock = threading.Lock()
reading = threading.Event()  # cleared by "stop_reading": the main loop stops reading stdin
reading.set()
_out = sys.stdout.buffer
_record = None  # the "record" file, if any
_record_lock = threading.Lock()


def record(entry) -> None:
    if _record is not None:
        with _record_lock:
            _record.write(json.dumps(entry) + "\n")
            _record.flush()


def send(msg: dict) -> None:
    if "method" in msg and "id" in msg:
        record({"agent_request": msg})  # so the client's answer can be matched to its method
    data = (json.dumps(msg) + "\n").encode()
    with _write_lock:
        _out.write(data)
        _out.flush()


def write_raw(data: bytes) -> None:
    with _write_lock:
        _out.write(data)
        _out.flush()


class Agent:
    def __init__(self, scenario: dict) -> None:
        self.s = scenario
        self.sid = None
        self.cancelled = threading.Event()
        self.pending: dict = {}
        self.next_id = 0
        self.turn_answered = threading.Event()
        self.prompt_id = None
        self.prompt_lock = threading.Lock()
        self.children: list = []
        self.last_terminal = ""  # the terminalId of the last terminal/create answer ($TERM)
        self.config = json.loads(json.dumps(scenario.get("config_options") or [])) if "config_options" in scenario else None
        self.modes = json.loads(json.dumps(scenario["modes"])) if "modes" in scenario else None
        self.models = json.loads(json.dumps(scenario["models"])) if "models" in scenario else None

    # -- outgoing --------------------------------------------------------

    def new_id(self):
        if self.s.get("request_ids") == "uuid":
            return str(uuid.uuid4())
        rid = self.next_id
        self.next_id += 1
        return rid

    def update(self, update: dict) -> None:
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": self.sid, "update": update}})

    def chunk(self, text: str) -> None:
        self.update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})

    def ask(self, method: str, params: dict):
        rid = self.new_id()
        done = threading.Event()
        self.pending[json.dumps(rid)] = [done, None]
        params = json.loads(json.dumps(params).replace("$SID", self.sid or "").replace("$TERM", self.last_terminal))
        send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        done.wait()
        reply = self.pending.pop(json.dumps(rid))[1]
        result = reply.get("result")
        if isinstance(result, dict) and isinstance(result.get("terminalId"), str):
            self.last_terminal = result["terminalId"]
        return reply

    def answer_prompt(self, stop: str) -> None:
        if self.prompt_id is not None and not self.turn_answered.is_set():
            self.turn_answered.set()
            send({"jsonrpc": "2.0", "id": self.prompt_id, "result": {"stopReason": stop}})

    # -- actions ---------------------------------------------------------

    def run(self, actions: list) -> None:
        for action in actions:
            (key, value), = action.items()
            getattr(self, "do_" + key)(value)

    def do_update(self, value): self.update(json.loads(json.dumps(value).replace("$TERM", self.last_terminal)))
    def do_chunk(self, value): self.chunk(value)
    def do_raw(self, value): write_raw(value.replace("$SID", self.sid or "").encode() + b"\n")
    def do_raw_b64(self, value): write_raw(base64.b64decode(value))
    def do_stderr(self, value): sys.stderr.write(value + "\n"); sys.stderr.flush()

    def do_stderr_flood(self, value):
        line = b"log " + b"x" * 95 + b"\n"
        for _ in range(value // len(line) + 1):
            sys.stderr.buffer.write(line)
        sys.stderr.flush()

    def do_big_line(self, value):
        pad = "x" * max(0, value - 120)
        send({"jsonrpc": "2.0", "method": "session/update",
              "params": {"sessionId": self.sid, "update": {"sessionUpdate": "agent_message_chunk",
                                                          "content": {"type": "text", "text": pad}}}})

    def do_burst(self, value):
        for i in range(value):
            self.chunk(f"{i} ")

    def do_request(self, value):
        reply = self.ask(value["method"], value.get("params") or {})
        if "error" in reply:
            self.chunk("ERROR " + json.dumps(reply["error"]))
        else:
            self.chunk("RESULT " + json.dumps(reply.get("result")))

    def do_round_trip(self, value):
        self.ask(value, {})

    def do_send(self, value):
        send(json.loads(json.dumps(value).replace("$SID", self.sid or "")))

    def do_sleep(self, value): time.sleep(value)
    def do_wait_cancel(self, value): self.cancelled.wait()
    def do_stop(self, value): self.answer_prompt(value)
    def do_exit(self, value): os._exit(value)

    def do_spawn(self, value, detached=False):
        child = subprocess.Popen(["/bin/sh", "-c", value], start_new_session=detached,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.children.append(child)
        self.chunk(f"PID {child.pid} ")

    def do_spawn_detached(self, value): self.do_spawn(value, detached=True)

    def do_reply_prompt(self, value):
        send({"jsonrpc": "2.0", "id": self.prompt_id, **value})

    def do_request_raw(self, value):
        rid = self.new_id()
        done = threading.Event()
        self.pending[json.dumps(rid)] = [done, None]
        msg = {"jsonrpc": "2.0", "id": rid, "method": value["method"]}
        if "params" in value:
            msg["params"] = json.loads(json.dumps(value["params"]).replace("$SID", self.sid or ""))
        send(msg)
        done.wait()
        self.report_reply(rid)

    def report_reply(self, rid):
        """The client's answer to request ``rid``, as a chunk the test can read."""
        reply = self.pending.pop(json.dumps(rid))[1]
        if "error" in reply:
            self.chunk("ERROR " + json.dumps(reply["error"]))
        else:
            self.chunk("RESULT " + json.dumps(reply.get("result")))

    def do_signal(self, value): os.kill(os.getpid(), value)

    def do_deep(self, value):
        depth, kind = value["depth"], value.get("as", "update")
        sid = json.dumps(self.sid)
        if kind == "update":
            n = depth - 4
            line = ('{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%s,"update":'
                    '{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"DEEP%d "},'
                    '"_meta":{"x":%s%s}}}}' % (sid, depth, "[" * n, "]" * n))
            write_raw(line.encode() + b"\n")
        elif kind == "request":
            n = depth - 2
            rid = self.new_id()
            done = threading.Event()
            self.pending[json.dumps(rid)] = [done, None]
            line = ('{"jsonrpc":"2.0","id":%s,"method":%s,"params":{"sessionId":%s,"x":%s%s}}'
                    % (json.dumps(rid), json.dumps(value.get("method", "_test/deep")), sid, "[" * n, "]" * n))
            write_raw(line.encode() + b"\n")
            done.wait()
            self.report_reply(rid)
        else:  # the prompt's answer
            n = depth - 3
            self.turn_answered.set()
            line = ('{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn","_meta":{"x":%s%s}}}'
                    % (json.dumps(self.prompt_id), "[" * n, "]" * n))
            write_raw(line.encode() + b"\n")

    def do_noise_flood(self, value):
        lines = b"".join(b"noise line %d\n" % i for i in range(value))
        write_raw(lines)

    def do_stop_reading(self, value):
        reading.clear()

    def do_resume_reading(self, value):
        reading.set()

    def do_close_stdout(self, value):
        with _write_lock:
            _out.flush()
            os.close(1)

    # -- session state -----------------------------------------------------

    def state(self) -> dict:
        """What session/new, load and resume report besides the id."""
        out: dict = {}
        if self.config is not None:
            out["configOptions"] = self.config
        if self.modes is not None:
            out["modes"] = self.modes
        if self.models is not None:
            out["models"] = self.models
        return out

    def set_config(self, rid, params: dict) -> None:
        for opt in self.config or []:
            if opt.get("id") == params.get("configId"):
                values = [v for item in opt.get("options", [])
                          for v in (item.get("options") if "options" in item else [item])]
                if opt.get("type") == "boolean" and isinstance(params.get("value"), bool) \
                        or any(v.get("value") == params.get("value") for v in values):
                    opt["currentValue"] = params["value"]
                    send({"jsonrpc": "2.0", "id": rid, "result": {"configOptions": self.config}})
                    self.update({"sessionUpdate": "config_option_update", "configOptions": self.config})
                    return
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "no such config option or value"}})

    def set_state(self, rid, state: dict, list_key: str, id_key: str, current_key: str, wanted) -> None:
        if not any(item.get(id_key) == wanted for item in state.get(list_key, [])):
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": f"no such {id_key}"}})
            return
        state[current_key] = wanted
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
        if current_key == "currentModeId":
            self.update({"sessionUpdate": "current_mode_update", "currentModeId": wanted})

    # -- incoming --------------------------------------------------------

    def handle(self, msg: dict) -> None:
        method = msg.get("method")
        if method is None:
            slot = self.pending.get(json.dumps(msg.get("id")))
            if slot is not None:
                slot[1] = msg
                slot[0].set()
            return
        rid = msg.get("id")
        params = msg.get("params") or {}
        if method == "session/cancel":
            self.cancelled.set()
            if self.s.get("on_cancel", "end") == "end":
                self.answer_prompt("cancelled")
            return
        if rid is None:
            return
        if method == "initialize":
            self.run(self.s.get("init_actions", []))
        if method in self.s.get("never_answer", ()):
            return
        if method in self.s.get("errors", {}):
            send({"jsonrpc": "2.0", "id": rid, "error": self.s["errors"][method]})
            return
        delay = self.s.get("answer_delay", {}).get(method)
        if delay:
            time.sleep(delay)
        if method == "session/set_config_option" and self.config is not None:
            self.set_config(rid, params)
            return
        if method == "session/set_mode" and self.modes is not None:
            self.set_state(rid, self.modes, "availableModes", "id", "currentModeId", params.get("modeId"))
            return
        if method == "session/set_model" and self.models is not None:
            self.set_state(rid, self.models, "availableModels", "modelId", "currentModelId", params.get("modelId"))
            return
        if method == "session/resume" and self.s.get("resume"):
            self.sid = params.get("sessionId")
            send({"jsonrpc": "2.0", "id": rid, "result": self.state()})
            return
        if method == "initialize":
            caps = {"loadSession": bool(self.s.get("load"))}
            if self.s.get("resume"):
                caps["sessionCapabilities"] = {"resume": {}}
            result = {"protocolVersion": 1, "agentCapabilities": caps,
                      "agentInfo": {"name": "scripted", "version": "0"}, "authMethods": []}
            result.update(self.s.get("init", {}))
            send({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method == "session/new":
            over = self.s.get("new_session", {})
            token = self.s.get("auth_file")
            if token and not os.path.exists(token):  # logged out: the terminal login writes it
                send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": "Authentication required"}})
                return
            if "error" in over:
                send({"jsonrpc": "2.0", "id": rid, "error": over["error"]})
                return
            self.sid = "sess-" + uuid.uuid4().hex[:8]
            self.run(self.s.get("before_new", []))
            send({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": self.sid, **self.state(), **over}})
        elif method == "session/load":
            self.sid = params.get("sessionId")
            gap = self.s.get("replay_after")
            if gap is None:
                for update in self.s.get("history", []):
                    self.update(update)
            send({"jsonrpc": "2.0", "id": rid, "result": self.state()})
            if gap is not None:
                def replay() -> None:
                    for update in self.s.get("history", []):
                        time.sleep(gap)
                        self.update(update)
                threading.Thread(target=replay, daemon=True).start()
        elif method == "session/prompt":
            with self.prompt_lock:
                self.prompt_id = rid
                self.turn_answered.clear()
                self.cancelled.clear()
            text = "".join(b.get("text", "") for b in params.get("prompt", []) if isinstance(b, dict))
            actions = self.s.get("prompts", {}).get(text, self.s.get("prompt", [{"chunk": "ok"}]))

            def play() -> None:
                self.run(actions)
                if self.cancelled.is_set() and self.s.get("on_cancel", "end") == "ignore":
                    return
                with self.prompt_lock:  # answered early (an action) and a new prompt came: not ours
                    if self.prompt_id == rid:
                        self.answer_prompt("cancelled" if self.cancelled.is_set() else "end_turn")
                self.run(self.s.get("after_prompt", []))

            threading.Thread(target=play, daemon=True).start()
        elif method in self.s.get("responses", {}):
            result = json.loads(json.dumps(self.s["responses"][method]).replace("$SID", self.sid or ""))
            send({"jsonrpc": "2.0", "id": rid, "result": result})
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no {method}"}})


def login(scenario: dict) -> int:
    """``--login``: the agent's terminal auth flow, on a terminal the client shows."""
    sys.stdout.write(f"Scripted login ({os.environ.get('LOGIN_GREETING', 'no greeting')}). Log in? [y/n] ")
    sys.stdout.flush()
    answer = sys.stdin.readline().strip().lower()
    if answer != "y":
        print("not logged in")
        return 1
    with open(scenario["auth_file"], "w") as f:
        f.write("token")
    print("logged in")
    return 0


def main() -> None:
    arg = sys.argv[1] if len(sys.argv) > 1 else "{}"
    scenario = json.loads(open(arg).read() if os.path.exists(arg) else arg)
    if "--login" in sys.argv[2:]:
        sys.exit(login(scenario))
    global _record
    agent = Agent(scenario)
    if scenario.get("record"):
        _record = open(scenario["record"], "a", encoding="utf-8")
    parts: list = []  # pieces of the unterminated line (no quadratic re-joining)
    while True:
        reading.wait()  # "stop_reading" parks here, after at most one more read
        data = os.read(0, 65536)
        if not data:
            break
        if b"\n" not in data:
            parts.append(data)
            continue
        *lines, last = data.split(b"\n")
        lines[0] = b"".join(parts) + lines[0]
        parts = [last] if last else []
        for line in lines:
            if not line.strip():
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            record(msg)
            if isinstance(msg, dict):
                agent.handle(msg)
    if scenario.get("ignore_eof"):
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    main()
