/**
 * The blue-green switch of embedding model over 40 facts (test/helpers/model-switch.ts): every
 * step of the switch, with backfills of ten batches. The same at 1,000 facts: test/slow/.
 */
import { describeModelSwitch } from '../helpers/model-switch.ts';

describeModelSwitch({ facts: 40, embedBatch: 4 });
