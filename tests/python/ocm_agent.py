#!/usr/bin/env python3
"""A minimal OCM CloudEvents-over-gRPC agent built on Python grpcio.

It is a second, independent gRPC/protobuf implementation used by conductor's
interoperability tests. It imports the stubs generated from proto/cloudevent.proto
from the directory named by $CONDUCTOR_PYSTUBS (see scripts/setup-test-env.sh).

Subcommands (every output line on stdout is one JSON document):

  subscribe --addr H:P --cluster C --data-type DT [--source S] [--max-events N]
            [--timeout SECONDS] [--skip-heartbeats]
      {"kind":"header","metadata":{key:[values...]}}     once initial metadata arrives
      {"kind":"event","event":EVENT}                      per received CloudEvent
      {"kind":"end","code":NAME,"details":STR,"timed_out":BOOL,"reason":R}
         R is one of max_events, timeout, server_closed, error.

  publish --addr H:P (--event-json JSON|@FILE | --no-event) [--timeout SECONDS]
      {"kind":"publish","code":NAME,"details":STR}

Both take the connection options --ca FILE (TLS, trusting FILE; without it the
channel is plaintext), --cert FILE --key FILE (a client certificate) and
--token TOKEN (sent as "authorization: Bearer TOKEN" on every call, as sdk-go's
per-RPC credentials do; TLS only), and --server-name NAME (TLS name to check).

EVENT is {"id","source","spec_version","type",
          "attributes":{key:{CASE:value}}, "data_case", "binary_data_utf8"}
where CASE is the proto oneof field name (ce_boolean, ce_integer, ce_string,
ce_bytes [base64], ce_uri, ce_uri_ref, ce_timestamp [RFC 3339 UTC, nanoseconds
with trailing zeros trimmed]). For publish the event may instead carry
"binary_data_json" (any JSON, serialised compactly) or "text_data" (a string).
Exit status is 0 unless the command line (or the event JSON) is invalid (2).
"""

import argparse
import base64
import datetime
import json
import os
import sys
import threading

import grpc

HEARTBEAT_TYPE = "io.open-cluster-management.cloudevents.heartbeat"
_EPOCH = datetime.datetime(1970, 1, 1)

_stubs = os.environ.get("CONDUCTOR_PYSTUBS")
if not _stubs:
    sys.exit("ocm_agent: CONDUCTOR_PYSTUBS is not set (run scripts/setup-test-env.sh)")
sys.path.insert(0, _stubs)
import cloudevent_pb2 as pb  # noqa: E402
import cloudevent_pb2_grpc as pb_grpc  # noqa: E402


def emit(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def usage_error(msg):
    sys.stderr.write("ocm_agent: %s\n" % msg)
    sys.exit(2)


def ts_to_str(ts):
    text = (_EPOCH + datetime.timedelta(seconds=ts.seconds)).strftime("%Y-%m-%dT%H:%M:%S")
    if ts.nanos:
        text += "." + ("%09d" % ts.nanos).rstrip("0")
    return text + "Z"


def attr_to_json(value):
    case = value.WhichOneof("attr")
    if case is None:
        return {}
    v = getattr(value, case)
    if case == "ce_bytes":
        v = base64.b64encode(v).decode("ascii")
    elif case == "ce_timestamp":
        v = ts_to_str(v)
    return {case: v}


def event_to_json(ev):
    case = ev.WhichOneof("data")
    return {
        "id": ev.id,
        "source": ev.source,
        "spec_version": ev.spec_version,
        "type": ev.type,
        "attributes": {k: attr_to_json(v) for k, v in sorted(ev.attributes.items())},
        "data_case": case or "none",
        "binary_data_utf8": ev.binary_data.decode("utf-8", "replace") if case == "binary_data" else None,
    }


def attr_from_json(key, obj):
    value = pb.CloudEventAttributeValue()
    if not isinstance(obj, dict) or len(obj) > 1:
        usage_error("attribute %r must be an object with at most one oneof case" % key)
    for case, v in obj.items():
        if case == "ce_bytes":
            value.ce_bytes = base64.b64decode(v)
        elif case == "ce_timestamp":
            value.ce_timestamp.FromJsonString(v)
        elif case in ("ce_boolean", "ce_integer", "ce_string", "ce_uri", "ce_uri_ref"):
            setattr(value, case, v)
        else:
            usage_error("attribute %r: unknown case %r" % (key, case))
    return value


def event_from_json(obj):
    ev = pb.CloudEvent()
    for field in ("id", "source", "spec_version", "type"):
        setattr(ev, field, obj.get(field) or "")
    for key, attr in (obj.get("attributes") or {}).items():
        ev.attributes[key].CopyFrom(attr_from_json(key, attr))
    if obj.get("binary_data_json") is not None:
        ev.binary_data = json.dumps(obj["binary_data_json"], separators=(",", ":")).encode()
    elif obj.get("binary_data_utf8") is not None:
        ev.binary_data = obj["binary_data_utf8"].encode()
    elif obj.get("text_data") is not None:
        ev.text_data = obj["text_data"]
    return ev


def metadata_to_json(md):
    out = {}
    for key, value in md or ():
        if isinstance(value, bytes):  # "-bin" keys
            value = base64.b64encode(value).decode("ascii")
        out.setdefault(key, []).append(value)
    return out


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def open_channel(args):
    """A plaintext channel, or TLS with the given CA, client certificate and token."""
    if not args.ca:
        if args.cert or args.token:
            usage_error("--cert and --token need --ca (TLS)")
        return grpc.insecure_channel(args.addr)
    if bool(args.cert) != bool(args.key):
        usage_error("--cert and --key go together")
    creds = grpc.ssl_channel_credentials(
        root_certificates=read_file(args.ca),
        private_key=read_file(args.key) if args.key else None,
        certificate_chain=read_file(args.cert) if args.cert else None,
    )
    if args.token:
        creds = grpc.composite_channel_credentials(creds, grpc.access_token_call_credentials(args.token))
    options = [("grpc.ssl_target_name_override", args.server_name)] if args.server_name else []
    return grpc.secure_channel(args.addr, creds, options=options)


def cmd_subscribe(args):
    req = pb.SubscriptionRequest(source=args.source, cluster_name=args.cluster, data_type=args.data_type)
    with open_channel(args) as channel:
        call = pb_grpc.CloudEventServiceStub(channel).Subscribe(req)
        stopped = {"reason": None}

        def stop(reason):
            if stopped["reason"] is None:
                stopped["reason"] = reason
            call.cancel()

        timer = None
        if args.timeout is not None:
            timer = threading.Timer(args.timeout, stop, ("timeout",))
            timer.daemon = True
            timer.start()
        md = call.initial_metadata()
        # A trailers-only error response carries no initial metadata: print no header then.
        if md or not (call.done() and call.code() != grpc.StatusCode.OK):
            emit({"kind": "header", "metadata": metadata_to_json(md)})
        count = 0
        code, details = "OK", ""
        try:
            if args.max_events is not None and args.max_events <= 0:
                stop("max_events")
            for ev in call:
                if args.skip_heartbeats and ev.type == HEARTBEAT_TYPE:
                    continue
                emit({"kind": "event", "event": event_to_json(ev)})
                count += 1
                if args.max_events is not None and count >= args.max_events:
                    stop("max_events")
                    break
        except grpc.RpcError as err:
            if stopped["reason"] is None or err.code() != grpc.StatusCode.CANCELLED:
                code, details = err.code().name, err.details() or ""
        if timer is not None:
            timer.cancel()
        reason = stopped["reason"] or ("error" if code != "OK" else "server_closed")
        emit({"kind": "end", "code": code, "details": details,
              "timed_out": reason == "timeout", "reason": reason})
    return 0


def cmd_publish(args):
    req = pb.PublishRequest()
    if not args.no_event:
        text = args.event_json
        try:
            if text.startswith("@"):
                with open(text[1:], encoding="utf-8") as f:
                    text = f.read()
            obj = json.loads(text)
            if not isinstance(obj, dict):
                usage_error("--event-json must be a JSON object")
            req.event.CopyFrom(event_from_json(obj))
        except (OSError, ValueError, TypeError) as err:
            usage_error("bad --event-json: %s" % err)
    with open_channel(args) as channel:
        try:
            pb_grpc.CloudEventServiceStub(channel).Publish(req, timeout=args.timeout)
            code, details = "OK", ""
        except grpc.RpcError as err:
            code, details = err.code().name, err.details() or ""
    emit({"kind": "publish", "code": code, "details": details})
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="ocm_agent.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    connection = argparse.ArgumentParser(add_help=False)
    connection.add_argument("--addr", required=True, help="HOST:PORT")
    connection.add_argument("--ca", help="TLS: the CA certificate (PEM) the server's certificate is checked against")
    connection.add_argument("--cert", help="TLS: a client certificate (PEM)")
    connection.add_argument("--key", help="TLS: the client certificate's key (PEM)")
    connection.add_argument("--token", help="TLS: a bearer token sent with every call")
    connection.add_argument("--server-name", help="TLS: the name the server's certificate must carry")

    s = sub.add_parser("subscribe", parents=[connection], help="subscribe and print received events")
    s.add_argument("--cluster", required=True)
    s.add_argument("--data-type", required=True)
    s.add_argument("--source", default="")
    s.add_argument("--max-events", type=int, help="stop after N printed events")
    s.add_argument("--timeout", type=float, help="stop (code OK, timed_out true) after SECONDS")
    s.add_argument("--skip-heartbeats", action="store_true")
    s.set_defaults(func=cmd_subscribe)

    p = sub.add_parser("publish", parents=[connection], help="publish one event")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--event-json", help="event as JSON, or @FILE")
    group.add_argument("--no-event", action="store_true", help="send a PublishRequest without an event")
    p.add_argument("--timeout", type=float, default=10.0, help="RPC deadline in seconds (default 10)")
    p.set_defaults(func=cmd_publish)

    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
