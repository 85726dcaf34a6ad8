// An upload body that goes on until it is destroyed, as ffmpeg's output does
// while it still muxes: 1 MiB of `fill` every few ms. What a test uses to
// catch an upload in its middle (cancelled, or its storage gone).
import { Readable } from 'node:stream';

const MiB = 1024 * 1024;

export function endlessBody(fill: number, everyMs: number): Readable {
  return new Readable({
    read() {
      setTimeout(() => this.push(Buffer.alloc(MiB, fill)), everyMs);
    },
  });
}
