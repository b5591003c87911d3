// Declarations shared by both files; included after either header.
#include <stdint.h>

int mixed_minor_theirs_first(void);
int mixed_minor_ours_first(void);
int64_t mixed_numel_theirs_first(DLManagedTensorVersioned* m);
int64_t mixed_numel_ours_first(DLManagedTensorVersioned* m);
