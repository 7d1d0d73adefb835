@0xd3b0f1e2a4c59687;
# The bulk channel of a partition server (docs/actors.md, "Bulk transfer"):
# a partition's rows travel over a TCP connection of their own, each message
# below framed as a Cap'n Proto stream message, and each BulkChunk followed
# by its elements as raw little-endian float32 bytes, read straight into the
# table they belong to. A get: request, reply, the embeddings' chunks, the
# optimizer state's chunks. A put: request, reply (accepted, or refused
# naming why, before any row is sent), blocks of rows, reply (stored or
# not). A block is as many rows as one chunk holds (chunk of 2^21
# elements; rows of dim + state width elements): their embeddings' chunk,
# then their state's, so that a server storing on disk holds one block of
# the put at a time, never the whole partition.

struct BulkRequest {
  enum Op {
    get @0;
    put @1;
  }
  op @0 :Op;
  entity @1 :Text;
  part @2 :Int32;
  version @3 :UInt64;      # get: the least version; put: the version written
  baseVersion @4 :UInt64;  # put: the version it replaces (all ones: any)
  rows @5 :UInt64;         # put
  dim @6 :Int64;           # put
  purpose @7 :UInt8;       # what the transfer is for, counted by both ends: 0 a trainer's swap, 1 a checkpoint
  elementwiseState @8 :Bool;  # put: optimizer state [rows, dim] (element-wise Adagrad), not [rows]
}

struct BulkReply {
  ok @0 :Bool;
  error @1 :Text;          # when not ok
  version @2 :UInt64;      # get: the stored version
  rows @3 :UInt64;         # get
  dim @4 :Int64;           # get
  elementwiseState @5 :Bool;  # get: as in BulkRequest
}

struct BulkChunk {
  tensor @0 :UInt8;        # 0: embeddings [rows, dim], 1: optimizer state [rows] or [rows, dim]
  offset @1 :UInt64;       # first element
  count @2 :UInt64;        # elements that follow
}
