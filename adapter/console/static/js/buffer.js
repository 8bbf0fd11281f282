// What a stream view holds: at most 5,000 messages or 16 MiB, oldest dropped first.

export const MAX_MESSAGES = 5000;
export const MAX_BYTES = 16 * 1024 * 1024;

export class Bounded {
  constructor(maxMessages = MAX_MESSAGES, maxBytes = MAX_BYTES) {
    this.maxMessages = maxMessages;
    this.maxBytes = maxBytes;
    this.items = [];
    this.bytes = 0;
    this.dropped = 0;
  }

  /** Add one item ({size}); returns the items dropped to make room. */
  push(item) {
    this.items.push(item);
    this.bytes += item.size;
    const dropped = [];
    while (
      this.items.length > this.maxMessages ||
      (this.bytes > this.maxBytes && this.items.length > 1)
    ) {
      const old = this.items.shift();
      this.bytes -= old.size;
      dropped.push(old);
    }
    this.dropped += dropped.length;
    return dropped;
  }

  clear() {
    this.items = [];
    this.bytes = 0;
    this.dropped = 0;
  }
}
