@0xc192a6f993461a84;
# One frame of a tensor on the wire (docs/actors.md). A tensor travels as one or
# more frames, each well below Cap'n Proto's 64 MiB reader limit; frame k holds
# the elements [offset, offset + len(data)/element size) of the row-major data.

enum DType {
  float32 @0;
}

struct TensorFrame {
  dtype @0 :DType;
  shape @1 :List(Int64);
  totalElements @2 :UInt64;
  chunkIndex @3 :UInt32;
  chunkCount @4 :UInt32;
  offset @5 :UInt64;
  data @6 :Data;  # little-endian elements
}
