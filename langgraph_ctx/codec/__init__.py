"""Log codec: the whole line grammar of a thread log, pure, no I/O.

The storage layer moves the bytes; the saver decides what to write; both it and
``langgraph-ctx verify`` read and write lines through this package:

* `langgraph_ctx.codec.values`: channel values and writes (the value tags, the
  serializer payloads, the one walk over the messages a value refers to);
* `langgraph_ctx.codec.classes`: which classes a stored value may become, and
  how they are rebuilt without running their code;
* `langgraph_ctx.codec.messages`: message bodies and their digests;
* `langgraph_ctx.codec.lines`: the ``thread`` / ``msg`` / ``ckpt`` / ``writes``
  lines: build, parse, validate (the format version and the per-line checksum live
  there).

The names below are re-exported for code that imports ``langgraph_ctx.codec``.
"""

from langgraph_ctx.codec.lines import (
    DEFAULT_CHECKPOINT_VERSION,
    FORMAT_VERSION,
    KNOWN_CHECKPOINT_KEYS,
    LINE_KINDS,
    NEWEST_VERSION,
    check_line,
    dumps_line,
    extra_fields,
    extra_from_fields,
    line_checksum,
    loads_line,
    metadata_fields,
    metadata_from_fields,
    seal_line,
)
from langgraph_ctx.codec.messages import (
    MESSAGE_CLASSES,
    message_body,
    message_digest,
    message_digest_without_id,
    message_from_body,
    message_from_json,
    message_to_json,
)
from langgraph_ctx.codec.values import (
    PACKAGE_MODELS,
    SAFE_SERDE_TYPES,
    TRUSTED_MODEL_PREFIX,
    ClassRules,
    ListLoader,
    LogSerde,
    MessageLoader,
    MessageRef,
    decode_value,
    encode_value,
    is_message_list,
    is_plain_json,
    message_refs,
    refs_of,
    serde_decode,
    serde_encode,
    value_rules,
)
from langgraph_ctx.errors import CodecError

__all__ = [
    "DEFAULT_CHECKPOINT_VERSION",
    "FORMAT_VERSION",
    "KNOWN_CHECKPOINT_KEYS",
    "LINE_KINDS",
    "MESSAGE_CLASSES",
    "NEWEST_VERSION",
    "PACKAGE_MODELS",
    "SAFE_SERDE_TYPES",
    "TRUSTED_MODEL_PREFIX",
    "ClassRules",
    "CodecError",
    "ListLoader",
    "LogSerde",
    "MessageLoader",
    "MessageRef",
    "check_line",
    "decode_value",
    "dumps_line",
    "encode_value",
    "extra_fields",
    "extra_from_fields",
    "is_message_list",
    "is_plain_json",
    "line_checksum",
    "loads_line",
    "message_body",
    "message_digest",
    "message_digest_without_id",
    "message_from_body",
    "message_from_json",
    "message_refs",
    "message_to_json",
    "metadata_fields",
    "metadata_from_fields",
    "refs_of",
    "seal_line",
    "serde_decode",
    "serde_encode",
    "value_rules",
]
