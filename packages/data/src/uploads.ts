// Checks of files researchers upload, with errors that say what is wrong and where. Pure functions of
// the bytes, so the server refuses a bad file before storing anything and a test can hold them to it.

/** Largest text file a researcher may upload. */
export const MAX_TEXT_UPLOAD_BYTES = 32 * 1024 * 1024;
/** Smallest: enough for a few training windows and a held-out part. */
export const MIN_TEXT_UPLOAD_BYTES = 4096;

export class UploadError extends Error {}

const mib = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;

/** Where a byte sequence stops being UTF-8: the offset of the first malformed character (its first byte), or null. */
export function firstInvalidUtf8(bytes: Uint8Array): number | null {
  for (let i = 0; i < bytes.length; ) {
    const b = bytes[i];
    const len = b < 0x80 ? 1 : b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
    if (len === 0) return i;
    for (let k = 1; k < len; k++) if (i + k >= bytes.length || (bytes[i + k] & 0xc0) !== 0x80) return i;
    // Overlong three- and four-byte forms, surrogates and code points past U+10FFFF.
    if ((b === 0xe0 && bytes[i + 1] < 0xa0) || (b === 0xed && bytes[i + 1] > 0x9f) || (b === 0xf0 && bytes[i + 1] < 0x90) || (b === 0xf4 && bytes[i + 1] > 0x8f)) return i;
    i += len;
  }
  return null;
}

/** An uploaded text file's text, or an UploadError naming what is wrong. */
export function checkTextUpload(bytes: Uint8Array): string {
  if (bytes.length === 0) throw new UploadError('the file is empty');
  if (bytes.length > MAX_TEXT_UPLOAD_BYTES) throw new UploadError(`the file is ${mib(bytes.length)}; text uploads are at most ${mib(MAX_TEXT_UPLOAD_BYTES)}`);
  const bad = firstInvalidUtf8(bytes);
  if (bad !== null) {
    const seen = [...bytes.subarray(bad, bad + 4)].map((b) => b.toString(16).padStart(2, '0')).join(' ');
    throw new UploadError(`the file is not UTF-8 text: the character at byte ${bad} is malformed (bytes ${seen}); save it as UTF-8`);
  }
  const nul = bytes.indexOf(0);
  if (nul >= 0) throw new UploadError(`the file holds binary data, not text: a NUL byte at offset ${nul}`);
  if (bytes.length < MIN_TEXT_UPLOAD_BYTES) throw new UploadError(`too little text: ${bytes.length} bytes; at least ${MIN_TEXT_UPLOAD_BYTES} for a few training windows and a held-out part`);
  return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
}

/** Records of an uploaded text, for the train/validation split: its paragraphs (blocks between blank lines). */
export function paragraphs(text: string): string[] {
  return text.split(/\r?\n\s*\r?\n/).map((p) => p.trim()).filter((p) => p.length > 0);
}
