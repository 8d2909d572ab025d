// gaffer.d.mts is written by hand; gaffer.mjs is JavaScript typed by its
// JSDoc. tsconfig.impl.json has tsc derive the module's own declarations
// into build/impl; here each export and each class's instance side of the
// hand-written declarations must be assignable from the implementation's,
// so that `tsc -p .` fails when gaffer.d.mts promises a name, a member or
// a type gaffer.mjs does not have. The other direction (gaffer.mjs
// exports a name gaffer.d.mts lacks) is clients/dts_test.go's, and the
// tests in this folder use every declared name, checked by the same tsc.
import type * as Impl from "../build/impl/gaffer.mjs";
import type * as Decl from "../gaffer.mjs";

declare function impl<T>(): T;

// Job's constructor is private in the declarations (only the worker
// makes jobs), so its static side is left out; its instance side is below.
export const exported: Omit<typeof Decl, "Job"> = impl<typeof Impl>();
export const worker: Decl.Worker = impl<Impl.Worker>();
export const job: Decl.Job = impl<Impl.Job>();
export const apiError: Decl.APIError = impl<Impl.APIError>();
export const leaseLost: Decl.LeaseLost = impl<Impl.LeaseLost>();
export const permanent: Decl.Permanent = impl<Impl.Permanent>();
export const retryLater: Decl.RetryLater = impl<Impl.RetryLater>();
export const snooze: Decl.Snooze = impl<Impl.Snooze>();
export const options: ConstructorParameters<typeof Impl.Worker>[0] = impl<Decl.WorkerOptions>();
