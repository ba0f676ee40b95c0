import { z } from 'zod';
import { textSchema } from '../foundation/storable.ts';
import { remember, REMEMBER_TEXT_MAX } from '../memory/remember/remember.ts';
import { FactTypeSchema, IdSchema, TimestampSchema } from '../memory/schemas.ts';
import type { RememberSettings } from '../foundation/remember-settings.ts';
import { defineTool, type Tool } from './tool.ts';

const RememberedSchema = z.object({
  factId: z.uuid(),
  status: z.literal('remembered'),
  outcome: z.enum(['created', 'superseded', 'replayed']),
  version: z.number().int(),
  review: z.enum(['pending']).nullable().describe('"pending": held until a person verifies it; no search returns it before then'),
});

/**
 * `kindgi_remember` (DESIGN §7, issue 17): the agent writes what it learned. Type, text, an
 * optional key and end of validity are the model's to choose; the scope, trust (`unverified`),
 * who asserted it and how long it is kept are not (src/memory/remember/remember.ts).
 */
export const kindgiRemember = (settings: RememberSettings): Tool =>
  defineTool(
    'kindgi_remember',
    {
      title: 'Remember a fact',
      description:
        'Stores something worth knowing in later conversations: a preference, a fact about the user or the world, a note. ' +
        'It is stored as unverified, in your memory (not the whole organisation\'s). Give the same type and key again to replace ' +
        'what you remembered under that key; sending the same text again changes nothing. Text that reads like instructions to an ' +
        'assistant is held until a person reviews it. Write facts in the third person ("Prefers email"), not orders.',
      inputSchema: z.object({
        type: FactTypeSchema.refine((type) => settings.types.includes(type), {
          message: `must be one of: ${settings.types.join(', ')}`,
        }).describe(`What kind of memory this is; one of: ${settings.types.join(', ')}`),
        text: textSchema()
          .trim()
          .min(1, 'must not be empty')
          .max(REMEMBER_TEXT_MAX, `must be at most ${REMEMBER_TEXT_MAX} characters`)
          .describe(`The memory, at most ${REMEMBER_TEXT_MAX} characters`),
        key: IdSchema.optional().describe('A name for this memory (e.g. "favourite-colour"): remembering the same type and key again replaces it'),
        validUntil: TimestampSchema.optional().describe('When this stops being true (ISO 8601), if it is known'),
      }),
      outputSchema: RememberedSchema,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async (context, args) => {
      const { fact, outcome, signals, score } = await remember({ db: context.db, principal: context.principal }, args, settings);
      if (outcome !== 'replayed') await context.afterWrite(context.principal.tenantId);
      if (fact.review === 'pending' && outcome !== 'replayed') {
        // The ids, the signals and the score, never the text: logs are not a place for what users said.
        context.logger.info('remembered fact held for review', { requestId: context.requestId, factId: fact.id, version: fact.version, signals, score });
      }
      const structuredContent = { factId: fact.id, status: 'remembered' as const, outcome, version: fact.version, review: fact.review };
      return { structuredContent, content: [{ type: 'text', text: JSON.stringify(structuredContent) }] };
    },
  );
