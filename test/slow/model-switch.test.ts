/** The blue-green switch of embedding model (test/helpers/model-switch.ts) over 1,000 facts, in batches of 64. */
import { describeModelSwitch } from '../helpers/model-switch.ts';

describeModelSwitch({ facts: 1000, embedBatch: 64 });
