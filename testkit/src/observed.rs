//! One oracle over what clients observed, for every OS port (see the module docs once written).
