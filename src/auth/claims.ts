import { z } from 'zod';
import { textSchema } from '../foundation/storable.ts';

/**
 * Ids (tenant, subject, scope ids) are strings of 1–128 characters (DESIGN §3), storable as
 * text: a signed token is still refused (401) when an id holds a NUL or an unpaired surrogate,
 * which PostgreSQL cannot compare or would store as another tenant's id.
 */
export const idSchema = textSchema().min(1, 'must not be empty').max(128, 'must be at most 128 characters');

export const roles = ['admin', 'member', 'service'] as const;
export type Role = (typeof roles)[number];

const grantsSchema = z
  .object({ read: z.array(idSchema).default([]), write: z.array(idSchema).default([]) })
  .default({ read: [], write: [] });

/**
 * Where the MCP tools remember and recall for this token (docs/decisions/0090-mcp-remember-and-retrieve.md): scope
 * keys as a fact's scope has them. An app that mints a token for an agent talking to one end
 * user puts that conversation here; the model's arguments never choose a scope.
 */
const mcpClaimSchema = z
  .object({
    scope: z
      .strictObject({
        orgId: idSchema.optional(),
        projectId: idSchema.optional(),
        userId: idSchema.optional(),
        participantId: idSchema.optional(),
        threadId: idSchema.optional(),
        sessionId: idSchema.optional(),
      })
      .optional(),
  })
  .optional();

/** The claims Mnemo reads from a verified token (DESIGN §3, plus the optional `mcp`). */
export const claimsSchema = z.object({
  sub: idSchema,
  tid: idSchema,
  role: z.enum(roles),
  projects: grantsSchema,
  orgs: grantsSchema,
  mcp: mcpClaimSchema,
});
export type Claims = z.infer<typeof claimsSchema>;
