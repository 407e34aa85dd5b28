/* Shared definitions of tokembed's compiled tokenizer modules. */
#ifndef TOKEMBED_NATIVE_COMMON_H
#define TOKEMBED_NATIVE_COMMON_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stddef.h>
#endif
