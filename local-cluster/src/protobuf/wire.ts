// The protobuf wire format, as much of it as Kubernetes' gogo-generated
// messages use: varints, length-delimited fields and (for doubles) fixed64.

export const WireType = {
  Varint: 0,
  Fixed64: 1,
  LengthDelimited: 2,
  Fixed32: 5,
} as const;

/** Errors worded like Go's generated Unmarshal ones, which the apiserver puts in its 400. */
export class ProtobufError extends Error {}

export class Reader {
  private pos = 0;

  constructor(private readonly buf: Buffer) {}

  get done(): boolean {
    return this.pos >= this.buf.length;
  }

  varint(): bigint {
    let result = 0n;
    for (let shift = 0n; ; shift += 7n) {
      if (shift >= 70n) throw new ProtobufError('proto: integer overflow');
      if (this.pos >= this.buf.length) throw new ProtobufError('unexpected EOF');
      const b = this.buf[this.pos++]!;
      result |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) return BigInt.asUintN(64, result);
    }
  }

  /** A field key: its number and wire type. */
  key(): { num: number; wireType: number } {
    const key = this.varint();
    const num = Number(key >> 3n);
    if (num <= 0) throw new ProtobufError(`proto: illegal tag ${num} (wire type ${Number(key & 7n)})`);
    return { num, wireType: Number(key & 7n) };
  }

  bytes(): Buffer {
    const len = Number(this.varint());
    if (this.pos + len > this.buf.length) throw new ProtobufError('unexpected EOF');
    const out = this.buf.subarray(this.pos, this.pos + len);
    this.pos += len;
    return out;
  }

  fixed64(): Buffer {
    if (this.pos + 8 > this.buf.length) throw new ProtobufError('unexpected EOF');
    const out = this.buf.subarray(this.pos, this.pos + 8);
    this.pos += 8;
    return out;
  }

  /** Skips a field Go does not know, as its generated skipGenerated does. */
  skip(wireType: number): void {
    switch (wireType) {
      case WireType.Varint: this.varint(); return;
      case WireType.Fixed64: this.fixed64(); return;
      case WireType.LengthDelimited: this.bytes(); return;
      case WireType.Fixed32:
        if (this.pos + 4 > this.buf.length) throw new ProtobufError('unexpected EOF');
        this.pos += 4;
        return;
      default: throw new ProtobufError(`proto: illegal wireType ${wireType}`);
    }
  }
}
