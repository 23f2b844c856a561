/* caps.h — capabilities dropped (caps.c). */
#ifndef BRIG_CONTROLS_CAPS_H
#define BRIG_CONTROLS_CAPS_H

#include "core/error.h"

BRIG_INTERNAL int caps_drop_bounding(brig_error **err);
BRIG_INTERNAL int caps_drop_all(brig_error **err);
BRIG_INTERNAL int caps_verify_none(brig_error **err);

#endif
