/**
 * `X-Provenance: type:id` as KiwiFS parses it (internal/pipeline/provenance.go): split at the
 * first colon, both sides trimmed, both non-empty; anything else is ignored, never an error, so a
 * sloppy agent's write still lands. An id may contain colons (`run:prefix:suffix`).
 */
export function parseProvenanceHeader(value: string | undefined): { type: string; id: string } | undefined {
  if (value === undefined) return undefined;
  const colon = value.indexOf(':');
  if (colon < 0) return undefined;
  const type = value.slice(0, colon).trim();
  const id = value.slice(colon + 1).trim();
  // The lengths the fact's provenance entries allow; a longer header is as malformed as no colon.
  if (type === '' || id === '' || type.length > 128 || id.length > 1024) return undefined;
  return { type, id };
}
