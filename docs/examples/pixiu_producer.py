#!/usr/bin/env python3
"""A Pixiu producer in Python 3, standard library only (no pip install).

Written from docs/api.md and README.md: it posts a message (POST /v1/messages) or a
batch (POST /v1/messages/batch) with the API token, retries a 503 or a lost
connection with the same client_msg_id (so a retry never stores a message twice),
waiting at least the answer's Retry-After, and reads the errors' documented JSON body
{"error": {"code", "message"}}. It also mints a user's client token (HS256 JWT) for
GET /v1/connect the way README's key rule says. test/examples/python-producer.test.ts
runs it against a real node.

  python3 pixiu_producer.py send --to alice --type chat.text --data '{"text": "hi"}'
  python3 pixiu_producer.py batch messages.json      # a JSON list of messages, or -
  python3 pixiu_producer.py token alice --ttl 900    # a client token for alice

Each answer is printed as one JSON line on stdout (with its HTTP "status"); retries
and errors go to stderr. Exit status: 0 done, 1 refused or given up, 2 bad usage.
Import it to use Producer and mint_token from your own code.
"""
import argparse
import base64
import email.utils
import hashlib
import hmac
import http.client
import json
import math
import os
import random
import sys
import time
import urllib.parse
import uuid


class PixiuError(Exception):
    """An error answer: its HTTP status and the documented body's code and message."""

    def __init__(self, status, body):
        error = body.get("error", {}) if isinstance(body, dict) else {}
        self.status = status
        self.code = error.get("code", "")  # INVALID_REQUEST, UNAUTHORIZED, CONFLICT, ...
        self.message = error.get("message", "") if error else str(body)
        super().__init__(f"{status} {self.code}: {self.message}")


def retry_after_s(value, default=1.0):
    """Seconds to wait from a Retry-After header: delay-seconds or an HTTP date (RFC 9110 10.2.3)."""
    if value is None:
        return default
    if value.strip().isdigit():
        return float(value)
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return default


class Producer:
    """Producer routes of one Pixiu node, over one keep-alive HTTP/1.1 connection.

    retry_for_s bounds the retries of one request: README "Retries" asks for a budget
    that outlasts a node's restart (minutes), not 30 s.
    """

    def __init__(self, url, api_token, timeout_s=30.0, retry_for_s=300.0):
        parts = urllib.parse.urlsplit(url)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if self.https else 80)
        self.api_token = api_token
        self.timeout_s = timeout_s
        self.retry_for_s = retry_for_s
        self.conn = None

    def _once(self, method, path, body):
        """One attempt: (status, headers, parsed JSON or None). Raises OSError or HTTPException when the connection fails."""
        if self.conn is None:
            kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
            self.conn = kind(self.host, self.port, timeout=self.timeout_s)
        headers = {"Authorization": "Bearer " + self.api_token}
        if body is not None:
            # Without it the answer is 415 (urllib's default is a form type).
            headers["Content-Type"] = "application/json"
        try:
            self.conn.request(method, path, body=body, headers=headers)
            resp = self.conn.getresponse()
            raw = resp.read()
        except BaseException:
            # The server closes idle keep-alive connections after ~72 s (api.md): a
            # stale one fails here (BrokenPipeError, RemoteDisconnected); start afresh.
            self.close()
            raise
        if resp.getheader("Connection", "").lower() == "close":
            self.close()
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode("utf-8", "replace")  # not Pixiu's answer (a proxy's page?)
        return resp.status, resp.headers, parsed

    def request(self, method, path, payload=None):
        """Sends a request, retrying 503s and connection failures; returns (status, body, headers).

        The body is encoded once: a retry must send the very same bytes (api.md: the
        same client_msg_id with another message is 409). Raises PixiuError for an
        error answer, or the last failure once retry_for_s has passed.
        """
        body = None if payload is None else json.dumps(payload, allow_nan=False).encode("utf-8")
        deadline = time.monotonic() + self.retry_for_s
        backoff = 0.5
        while True:
            try:
                status, headers, parsed = self._once(method, path, body)
            except (OSError, http.client.HTTPException) as err:
                # Refused, reset or timed out: the request may have been done or not.
                # Safe to send again only because the body carries a client_msg_id.
                if time.monotonic() + backoff > deadline:
                    raise
                wait, why = backoff, f"connection failed: {err!r}"
            else:
                if status != 503:
                    if status >= 400:
                        raise PixiuError(status, parsed)
                    return status, parsed, headers
                wait = max(retry_after_s(headers.get("Retry-After")), backoff)
                if time.monotonic() + wait > deadline:
                    raise PixiuError(status, parsed)
                why = str(PixiuError(status, parsed))
            print(f"retrying in {wait:.1f} s: {why}", file=sys.stderr, flush=True)
            time.sleep(wait + random.uniform(0, 0.1 * wait))  # jitter: many producers, one node
            backoff = min(backoff * 2, 5.0)

    def send(self, message):
        """POST /v1/messages: 201 stored, or 200 {"duplicate": true} for a retry already stored."""
        message.setdefault("client_msg_id", str(uuid.uuid4()))
        return self.request("POST", "/v1/messages", message)

    def send_batch(self, messages):
        """POST /v1/messages/batch, resending the items answered 503 until none is.

        Returns the items' final results, in order. The answer is 200 with one result
        per item; an item that failed alone keeps its 4xx result (check each status).
        """
        for item in messages:
            item.setdefault("client_msg_id", str(uuid.uuid4()))
        results = [None] * len(messages)
        pending = list(range(len(messages)))
        deadline = time.monotonic() + self.retry_for_s
        while True:
            _, answer, headers = self.request("POST", "/v1/messages/batch", {"messages": [messages[i] for i in pending]})
            for i, result in zip(pending, answer["results"]):
                results[i] = result
            pending = [i for i in pending if results[i]["status"] == 503]
            # A batch answered 200 with an item 503 carries Retry-After, as a 503 does.
            wait = retry_after_s(headers.get("Retry-After"))
            if not pending or time.monotonic() + wait > deadline:
                return results
            print(f"retrying {len(pending)} batch item(s) answered 503 in {wait:.1f} s", file=sys.stderr, flush=True)
            time.sleep(wait)

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _b64url(data):
    # JWS compact form: base64url without padding (RFC 7515); Pixiu refuses "=", "+", "/".
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def mint_token(secret, user, ttl_s=900, tags=None, channels=None):
    """A client token (JWT, HS256): {sub, iat, exp} plus tags / channels when given.

    secret is the key's text: PIXIU_JWT_SECRET as set on the nodes, or the data dir's
    jwt-secret without its trailing newline (read_jwt_secret). Its UTF-8 bytes are the
    HMAC key; it is NOT base64url-decoded, though it looks like base64url (README).
    """
    now = int(time.time())
    claims = {"sub": user, "iat": now, "exp": now + ttl_s}
    if tags is not None:
        claims["tags"] = list(tags)  # arrays of strings, never one string
    if channels is not None:
        claims["channels"] = list(channels)
    header = {"alg": "HS256", "typ": "JWT"}
    signing_input = _b64url(json.dumps(header).encode()) + "." + _b64url(json.dumps(claims).encode())
    signature = hmac.new(secret.encode("utf-8"), signing_input.encode("ascii"), hashlib.sha256).digest()
    return signing_input + "." + _b64url(signature)


def _read_secret(env, path, what, option, name, data_dir_file):
    """The variable env when set (as on the nodes), else the file's text, trimmed as Pixiu trims it.

    Raises ValueError naming the variable and the file it looked for, and how to give
    either, when neither gives one (a bare "[Errno 2] No such file or directory" said
    neither: walk33 L-prod).
    """
    value = os.environ.get(env)
    if value:
        return value
    try:
        with open(path, encoding="utf-8") as f:
            value = f.read().strip()  # the file ends in a newline: signing with it gives 401
    except OSError as err:
        raise ValueError(f"{what}: {env} is not set and {path} cannot be read ({err.strerror or err}): "
                         f"set {env} to the nodes' {name}, or give its file with {option} "
                         f"(the data dir's secrets/{data_dir_file})") from err
    if not value:
        raise ValueError(f"{what}: {path} is empty")
    return value


def read_jwt_secret(path):
    """PIXIU_JWT_SECRET when set (as on the nodes), else the file's text; ValueError when neither gives one."""
    return _read_secret("PIXIU_JWT_SECRET", path, "no key to sign the token with", "--jwt-secret-file", "key", "jwt-secret")


def _api_token(args):
    return _read_secret("PIXIU_API_TOKEN", args.api_token_file, "no API token", "--api-token-file", "token", "api-token")


def _no_constant(name):
    """json's parse_constant: NaN, Infinity and -Infinity, which json.loads takes, are not JSON
    (RFC 8259 section 6), and request() could not send them: refused as bad input, not a traceback."""
    raise ValueError(f"{name} (JSON has no NaN or Infinity)")


def _finite_float(text):
    """json's parse_float: a number literal past a double's range (1e400) parses as inf, with no
    parse_constant call, and request() could not send it: refused as bad input, not a traceback
    (Pixiu refuses such a number too: docs/api.md "Input rules")."""
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} is outside the range of a double (JSON cannot carry it back)")
    return value


def _read_messages(path):
    """A batch from a file (or - for stdin): a JSON list of messages, or {"messages": [...]}."""
    if path == "-":
        data = json.load(sys.stdin, parse_constant=_no_constant, parse_float=_finite_float)
    else:
        with open(path, encoding="utf-8") as f:
            data = json.load(f, parse_constant=_no_constant, parse_float=_finite_float)
    return data["messages"] if isinstance(data, dict) else data


def _json_arg(text):
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not JSON: {err}")


def _secret_file(name):
    """The data dir's secrets/<name>: under PIXIU_DATA_DIR when set, as `pixiu token` reads it, else storage/."""
    return os.path.join(os.environ.get("PIXIU_DATA_DIR") or "storage", "secrets", name)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="Run a command with --help for its options.")
    commands = parser.add_subparsers(dest="command", required=True)
    node = argparse.ArgumentParser(add_help=False)  # the options of send and batch
    node.add_argument("--url", default=os.environ.get("PIXIU_URL", "http://127.0.0.1:8080"),
                      help="the node's base URL (PIXIU_URL; default %(default)s)")
    node.add_argument("--api-token-file", default=_secret_file("api-token"),
                      help="where the API token is, unless PIXIU_API_TOKEN is set "
                           "(default: secrets/api-token in PIXIU_DATA_DIR, else storage/; here %(default)s)")
    node.add_argument("--retry-for", type=float, default=300.0, metavar="SECONDS",
                      help="give up retrying a 503 or a lost connection after this long (default %(default)s)")

    send = commands.add_parser("send", parents=[node], help="post one message")
    to_or_room = send.add_mutually_exclusive_group(required=True)
    to_or_room.add_argument("--to", action="append", metavar="USER", help="a recipient (repeat for several)")
    to_or_room.add_argument("--room", help="a room instead of recipients")
    send.add_argument("--type", required=True, help="the message's type, e.g. chat.text")
    send.add_argument("--data", type=_json_arg, default="{}", help="the message's data, JSON (default {})")
    send.add_argument("--from", dest="sender", help="the sender to show (optional)")
    send.add_argument("--ttl", type=int, help="seconds the message is kept (default 7 days)")
    send.add_argument("--client-msg-id", help="your idempotency key (default: a new UUID); send the same one to retry")

    batch = commands.add_parser("batch", parents=[node], help="post a batch (up to 1,000 messages)")
    batch.add_argument("file", help="a JSON list of messages, or {\"messages\": [...]}; - reads stdin")

    token = commands.add_parser("token", help="mint a client token (HS256) for GET /v1/connect")
    token.add_argument("user", help="the token's sub: the user id")
    token.add_argument("--ttl", type=int, default=900, help="seconds until exp (default %(default)s)")
    token.add_argument("--tags", help="comma-separated broadcast tags")
    token.add_argument("--channels", help="comma-separated channel patterns")
    token.add_argument("--jwt-secret-file", default=_secret_file("jwt-secret"),
                       help="the key's file, unless PIXIU_JWT_SECRET is set "
                            "(default: secrets/jwt-secret in PIXIU_DATA_DIR, else storage/; here %(default)s)")
    args = parser.parse_args(argv)

    try:
        secret = read_jwt_secret(args.jwt_secret_file) if args.command == "token" else None
        api_token = None if args.command == "token" else _api_token(args)
        batch_items = _read_messages(args.file) if args.command == "batch" else None
    except (OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if args.command == "token":
        tags = None if args.tags is None else args.tags.split(",")
        channels = None if args.channels is None else args.channels.split(",")
        print(mint_token(secret, args.user, args.ttl, tags, channels))
        return 0

    producer = Producer(args.url, api_token, retry_for_s=args.retry_for)
    try:
        if args.command == "send":
            message = {"type": args.type, "data": args.data}
            if args.room is not None:
                message["room"] = args.room
            else:
                message["to"] = args.to[0] if len(args.to) == 1 else args.to
            # Leave out what is not set: "ttl": null is 400, not the default (api.md).
            for key, value in (("from", args.sender), ("ttl", args.ttl), ("client_msg_id", args.client_msg_id)):
                if value is not None:
                    message[key] = value
            status, answer, _ = producer.send(message)
            print(json.dumps({"status": status, **answer}))
        else:
            results = producer.send_batch(batch_items)
            print(json.dumps({"results": results}))
            if any(r["status"] >= 400 for r in results):
                return 1
        return 0
    except PixiuError as err:
        print(f"error {err}", file=sys.stderr)
        return 1
    except (OSError, http.client.HTTPException) as err:
        print(f"gave up: {err!r}", file=sys.stderr)
        return 1
    finally:
        producer.close()


if __name__ == "__main__":
    sys.exit(main())
