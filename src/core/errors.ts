import type { Principal } from '../auth/permissions.ts';
import { AppError } from '../foundation/app-error.ts';

/** The domain's errors. Each carries its wire code; src/http/errors.ts maps codes to statuses. */

export class FactNotFound extends AppError {
  constructor(id: string, detail?: string) {
    super('fact-not-found', detail ?? `No fact ${id}`);
    this.name = 'FactNotFound';
  }
}

export class FactChanged extends AppError {
  constructor(expected: number, current: number) {
    super('fact-changed', `The fact is at version ${current}, not ${expected}`, { currentVersion: current });
    this.name = 'FactChanged';
  }
}

export class PermissionDenied extends AppError {
  constructor(message: string) {
    super('permission-denied', message);
    this.name = 'PermissionDenied';
  }
}

/** For what a tenant admin alone may do (erasure, nightly reports, legal holds…); `message` says what. */
export function assertTenantAdmin(principal: Pick<Principal, 'role'>, message: string): void {
  if (principal.role !== 'admin') throw new PermissionDenied(message);
}

export class ScopeMismatch extends AppError {
  constructor() {
    super('scope-mismatch', 'scope.tenantId must be your own tenant (or left out)');
    this.name = 'ScopeMismatch';
  }
}

export class LegalHold extends AppError {
  constructor(id: string) {
    super('legal-hold', `Fact ${id} is under legal hold`);
    this.name = 'LegalHold';
  }
}

export class BadInput extends AppError {
  constructor(field: string, message: string) {
    super('bad-input', `${field}: ${message}`, { details: [{ path: field, message }] });
    this.name = 'BadInput';
  }
}

/**
 * 409: a write names a person or conversation whose erasure is pending or running (DESIGN §10).
 * `index` says which of the writes checked together named them (a batch's item).
 */
export class ErasureInProgress extends AppError {
  constructor(
    erasureId: string,
    readonly index: number,
  ) {
    super('erasure-in-progress', 'A person or conversation this write names is being erased; retry once the erasure has finished', { erasureId });
    this.name = 'ErasureInProgress';
  }
}
