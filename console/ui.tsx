/** Small pieces every page uses: how an API error reads, a fact's preview, a time, why a fact is held. */
import { ApiError, type ReviewReason } from './api.ts';

export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null;
  const text =
    error instanceof ApiError
      ? error.status === 403
        ? `Your token may not do this (403 ${error.code}): ${error.message}`
        : error.status === 401
          ? `The API did not accept your token (expired, or not for this server): sign out and sign in with a new one. (${error.message})`
          : `${error.status} ${error.code}: ${error.message}`
      : `The request failed: ${(error as Error).message ?? String(error)}`;
  return (
    <p role="alert" class="error">
      {text}
    </p>
  );
}

/** The content's text as one line, at most `max` characters: shown as text, never as markup. */
export function preview(content: unknown, max = 140): string {
  const text = content && typeof content === 'object' && typeof (content as { text?: unknown }).text === 'string' ? (content as { text: string }).text : JSON.stringify(content);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

export const when = (iso: string | null) => (iso ? new Date(iso).toLocaleString() : '—');

export const canVerify = (role: string) => role === 'admin' || role === 'member';

/**
 * Why a fact is held, in words, for the person deciding: the patterns that matched, the learned
 * model's score against the threshold it was held at, or that the server holds everything.
 */
export function heldBecause(reason: ReviewReason | null): string {
  if (!reason) return 'held: reads like an instruction';
  const patterns = reason.signals.filter((signal) => signal !== 'classifier' && signal !== 'check-budget');
  const parts: string[] = [];
  if (patterns.length > 0) parts.push(`patterns ${patterns.join(', ')}`);
  if (reason.score !== null) parts.push(`model score ${reason.score.toFixed(3)}${reason.signals.includes('classifier') ? ` ≥ ${reason.threshold}` : ` (holds at ${reason.threshold})`}`);
  if (reason.signals.includes('check-budget')) parts.push('too long or slow to read in full');
  if (reason.signals.length === 0) return `held: this server holds everything agents remember; ${parts.join('; ')}`;
  return `held: ${parts.join('; ')}`;
}
