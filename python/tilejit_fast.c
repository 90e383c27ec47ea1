/*
 * tilejit_fast.c — the optional CPython extension _tilejit_fast: the hot
 * path of tilejit.softmax and tilejit.log_softmax for torch tensors in C.
 *
 * A call of a layout tilejit.py has already planned (checked, and its C
 * arguments kept in tilejit._plans) costs the interpreter's bytecode and
 * ctypes' conversion of ten arguments on top of the launch; here the same
 * steps run in C: the layout key (the very tuple tilejit.py builds), the
 * plan's look-up, the output's allocation through the plan's allocator,
 * the two data pointers, torch's current stream, and the call of the C
 * function with the GIL released, as ctypes releases it.
 *
 * Everything else goes to the Python function the op wraps, unchanged:
 * the first call of a layout, objects that are not torch tensors, any
 * argument to check or refuse. tilejit.py stays the one definition of the
 * checks; this file repeats only the key and the call, and the Python
 * tests run both paths.
 *
 * It needs only Python's headers (3.10 or later): the C function arrives
 * as an address, so the module does not link libtilejit.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>
#include <stdint.h>

/* Bumped when the plan's or the key's layout changes in tilejit.py. */
#define FAST_ABI 2

/* tj_softmax and tj_log_softmax. */
typedef int (*row_fn)(void *ctx, int dtype, int64_t m, int64_t n, uint64_t y, int64_t y_stride,
                      uint64_t x, int64_t x_stride, void *stream, const void *options);

/* The plan's raw part, tilejit.py's plan[9]: (ctx, dtype, m, n, y_stride,
 * x_stride, options, device), every one an int. */
enum { RAW_CTX, RAW_DTYPE, RAW_M, RAW_N, RAW_Y_STRIDE, RAW_X_STRIDE, RAW_OPTIONS, RAW_DEVICE,
       RAW_COUNT };
#define PLAN_ALLOCATE 8
#define PLAN_RAW      9

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject *dict;       /* __doc__, __name__, __wrapped__ ... */
  PyObject *slow;       /* the Python op: everything but the hot path */
  PyObject *plans;      /* tilejit._plans: layout key -> plan */
  PyObject *tensor;     /* torch.Tensor, once tilejit.py has seen torch */
  PyObject *raw_stream; /* device -> torch's current CUstream, an int */
  PyObject *fail;       /* fail(status, ctx): raises tilejit.Error */
  PyObject *fn_owner;   /* what keeps fn alive (a ctypes function) */
  row_fn fn;
} RowOp;

static PyObject *s_out, *s_num_warps, *s_backend, *s_template, *s_stream, *s_ptx, *s_auto,
    *s_dtype, *s_shape, *s_stride, *s_get_device, *s_is_cuda, *s_data_ptr, *zero;

/* (t.dtype, t.shape, t.stride(), t.get_device(), t.is_cuda) into k[0..4]. */
static int layout(PyObject *t, PyObject **k) {
  k[0] = PyObject_GetAttr(t, s_dtype);
  k[1] = k[0] ? PyObject_GetAttr(t, s_shape) : NULL;
  k[2] = k[1] ? PyObject_CallMethodNoArgs(t, s_stride) : NULL;
  k[3] = k[2] ? PyObject_CallMethodNoArgs(t, s_get_device) : NULL;
  k[4] = k[3] ? PyObject_GetAttr(t, s_is_cuda) : NULL;
  return k[4] ? 0 : -1;
}

/* v, an int in [0, 2^64), into *out: 0; 1 when v is anything else (not an
 * exact int, or out of range), which the Python op refuses with its own
 * message. */
static int address_of(PyObject *v, uint64_t *out) {
  if (!PyLong_CheckExact(v)) return 1;
  *out = PyLong_AsUnsignedLongLong(v);
  if (*out != (uint64_t)-1 || !PyErr_Occurred()) return 0;
  PyErr_Clear();
  return 1;
}

/* t.data_ptr() as a 64-bit address: 0, 1 (see address_of) or -1 with an
 * exception set. */
static int data_ptr(PyObject *t, uint64_t *out) {
  PyObject *p = PyObject_CallMethodNoArgs(t, s_data_ptr);
  if (!p) return -1;
  int st = address_of(p, out);
  Py_DECREF(p);
  return st;
}

/* The plan of this call's layout, a new reference, or NULL when tilejit.py
 * has none: the key as tilejit.py builds it, (x.dtype, x.shape, x.stride(),
 * x.get_device(), x.is_cuda, out's key, num_warps, backend, template), out's
 * key None (no out), True (out is x) or out's own five. An Exception on the
 * way is cleared, since the Python op meets it again and reports it; any
 * other (KeyboardInterrupt, SystemExit) stays set, with NULL. */
static PyObject *find_plan(RowOp *op, PyObject *x, PyObject *out, PyObject *const *options) {
  PyObject *k[9] = {0}, *o[5] = {0}, *key = NULL, *plan = NULL;
  if (layout(x, k) < 0) goto done;
  if (out == Py_None || out == x) {
    k[5] = Py_NewRef(out == x ? Py_True : Py_None);
  } else {
    if (layout(out, o) < 0) goto done;
    if (!(k[5] = PyTuple_New(5))) goto done;
    for (int i = 0; i < 5; i++) PyTuple_SET_ITEM(k[5], i, o[i]), o[i] = NULL;
  }
  for (int i = 0; i < 3; i++) k[6 + i] = Py_NewRef(options[i]);
  if (!(key = PyTuple_New(9))) goto done;
  for (int i = 0; i < 9; i++) PyTuple_SET_ITEM(key, i, k[i]), k[i] = NULL;
#if PY_VERSION_HEX >= 0x030D0000 /* a strong reference: safe without the GIL too */
  if (PyDict_GetItemRef(op->plans, key, &plan) < 0) plan = NULL;
#else
  plan = Py_XNewRef(PyDict_GetItemWithError(op->plans, key));
#endif
  if (plan && (!PyTuple_CheckExact(plan) || PyTuple_GET_SIZE(plan) <= PLAN_RAW)) Py_CLEAR(plan);
done:
  for (int i = 0; i < 9; i++) Py_XDECREF(k[i]);
  for (int i = 0; i < 5; i++) Py_XDECREF(o[i]);
  Py_XDECREF(key);
  if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_Exception)) PyErr_Clear();
  return plan;
}

/* The plan's raw ints; -1 (an exception set) if one is not an int. */
static int raw_of(PyObject *plan, int64_t *raw) {
  PyObject *t = PyTuple_GET_ITEM(plan, PLAN_RAW);
  if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != RAW_COUNT) {
    PyErr_SetString(PyExc_SystemError, "tilejit: a plan without its raw arguments");
    return -1;
  }
  for (int i = 0; i < RAW_COUNT; i++) {
    raw[i] = (int64_t)PyLong_AsUnsignedLongLongMask(PyTuple_GET_ITEM(t, i));
    if (PyErr_Occurred()) return -1;
  }
  return 0;
}

/* The stream: None (torch's current one on the plan's device) or an int;
 * 0, 1 (see address_of) or -1 with an exception set. */
static int stream_of(RowOp *op, PyObject *stream, int64_t device, uint64_t *out) {
  if (stream != Py_None) return address_of(stream, out);
  PyObject *get = Py_NewRef(op->raw_stream); /* configure() may replace it meanwhile */
  PyObject *d = PyLong_FromLongLong(device);
  PyObject *s = d ? PyObject_CallOneArg(get, d) : NULL;
  Py_XDECREF(d);
  Py_DECREF(get);
  if (!s) return -1;
  int st = address_of(s, out);
  Py_DECREF(s);
  return st;
}

static PyObject *row_op_call(PyObject *self, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames) {
  RowOp *op = (RowOp *)self;
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  PyObject *x, *out = Py_None, *stream = Py_None, *options[3] = {zero, s_ptx, s_auto};
  PyObject *const names[4] = {s_num_warps, s_backend, s_template, s_stream};
  if (!op->tensor || nargs < 1 || nargs > 2) goto slow;
  x = args[0];
  if (nargs == 2) out = args[1];
  for (Py_ssize_t i = 0; i < nkw; i++) {
    PyObject *name = PyTuple_GET_ITEM(kwnames, i), *value = args[nargs + i];
    int j = 0;
    while (j < 4 && name != names[j]) j++; /* keywords arrive interned */
    if (j == 3) stream = value;
    else if (j < 3) options[j] = value;
    else if (name == s_out && nargs == 1) out = value;
    else goto slow;
  }
  if (!PyObject_TypeCheck(x, (PyTypeObject *)op->tensor)) goto slow;
  if (out != Py_None && out != x && !PyObject_TypeCheck(out, (PyTypeObject *)op->tensor))
    goto slow;
  PyObject *plan = find_plan(op, x, out, options); /* held: the dictionary may drop it */
  if (!plan) {
    if (PyErr_Occurred()) return NULL;
    goto slow;
  }
  int64_t raw[RAW_COUNT];
  uint64_t s = 0, y_ptr = 0, x_ptr = 0;
  PyObject *y = NULL;
  int st = raw_of(plan, raw);
  if (st == 0) st = stream_of(op, stream, raw[RAW_DEVICE], &s);
  if (st == 0) {
    y = out == Py_None ? PyObject_CallOneArg(PyTuple_GET_ITEM(plan, PLAN_ALLOCATE), x)
                       : Py_NewRef(out);
    st = y ? data_ptr(y, &y_ptr) : -1;
    if (st == 0) st = data_ptr(x, &x_ptr);
  }
  Py_DECREF(plan);
  if (st != 0) {
    Py_XDECREF(y);
    if (st < 0) return NULL;
    goto slow; /* a value the Python op refuses, with its own message */
  }
  int status;
  row_fn fn = op->fn; /* set_function() may run while the GIL is released */
  Py_BEGIN_ALLOW_THREADS
  status = fn((void *)(uintptr_t)raw[RAW_CTX], (int)raw[RAW_DTYPE], raw[RAW_M], raw[RAW_N],
                  y_ptr, raw[RAW_Y_STRIDE], x_ptr, raw[RAW_X_STRIDE], (void *)(uintptr_t)s,
                  (const void *)(uintptr_t)raw[RAW_OPTIONS]);
  Py_END_ALLOW_THREADS
  if (status != 0) {
    Py_DECREF(y);
    PyObject *r = PyObject_CallFunction(op->fail, "iK", status, (unsigned long long)raw[RAW_CTX]);
    Py_XDECREF(r); /* fail raises */
    if (!PyErr_Occurred()) PyErr_Format(PyExc_RuntimeError, "tilejit: status %d", status);
    return NULL;
  }
  return y;
slow:
  return PyObject_Vectorcall(op->slow, args, nargsf, kwnames);
}

static int row_op_traverse(PyObject *self, visitproc visit, void *arg) {
  RowOp *op = (RowOp *)self;
  Py_VISIT(op->dict);
  Py_VISIT(op->slow);
  Py_VISIT(op->plans);
  Py_VISIT(op->tensor);
  Py_VISIT(op->raw_stream);
  Py_VISIT(op->fail);
  Py_VISIT(op->fn_owner);
  return 0;
}

static int row_op_clear(PyObject *self) {
  RowOp *op = (RowOp *)self;
  Py_CLEAR(op->dict);
  Py_CLEAR(op->slow);
  Py_CLEAR(op->plans);
  Py_CLEAR(op->tensor);
  Py_CLEAR(op->raw_stream);
  Py_CLEAR(op->fail);
  Py_CLEAR(op->fn_owner);
  return 0;
}

/* Its __wrapped__ (the Python op) refers back to it through the module's
 * globals: a cycle, for the collector. */
static void row_op_dealloc(PyObject *self) {
  PyObject_GC_UnTrack(self);
  row_op_clear(self);
  Py_TYPE(self)->tp_free(self);
}

/* op.configure(tensor_type, raw_stream): torch is in use; until then every
 * call goes to the Python op. */
static PyObject *row_op_configure(PyObject *self, PyObject *args) {
  RowOp *op = (RowOp *)self;
  PyObject *tensor, *raw_stream;
  if (!PyArg_ParseTuple(args, "O!O:configure", &PyType_Type, &tensor, &raw_stream)) return NULL;
  Py_XSETREF(op->tensor, Py_NewRef(tensor));
  Py_XSETREF(op->raw_stream, Py_NewRef(raw_stream));
  Py_RETURN_NONE;
}

/* The C function at address, kept alive by owner (a ctypes function). */
static int set_function(RowOp *op, PyObject *address, PyObject *owner) {
  void *fn = PyLong_AsVoidPtr(address);
  if (!fn && PyErr_Occurred()) return -1;
  if (!fn) return PyErr_SetString(PyExc_ValueError, "tilejit: a NULL function"), -1;
  Py_XSETREF(op->fn_owner, Py_NewRef(owner));
  op->fn = (row_fn)(uintptr_t)fn;
  return 0;
}

/* op.set_function(address, owner): the C function to call, and the object
 * that keeps it alive (tests put a recorder here). */
static PyObject *row_op_set_function(PyObject *self, PyObject *args) {
  PyObject *address, *owner;
  if (!PyArg_ParseTuple(args, "OO:set_function", &address, &owner)) return NULL;
  if (set_function((RowOp *)self, address, owner) < 0) return NULL;
  Py_RETURN_NONE;
}

/* <tilejit.softmax (hot path in C)>, by the __qualname__ tilejit.py sets. */
static PyObject *row_op_repr(PyObject *self) {
  PyObject *dict = ((RowOp *)self)->dict;
  PyObject *name = dict ? PyDict_GetItemString(dict, "__qualname__") : NULL;
  if (!name) return PyUnicode_FromString("<tilejit row op (hot path in C)>");
  return PyUnicode_FromFormat("<tilejit.%S (hot path in C)>", name);
}

static PyMethodDef row_op_methods[] = {
    {"configure", row_op_configure, METH_VARARGS, "configure(tensor_type, raw_stream)"},
    {"set_function", row_op_set_function, METH_VARARGS, "set_function(address, owner)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject row_op_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_tilejit_fast.RowOp",
    .tp_basicsize = sizeof(RowOp),
    .tp_dealloc = row_op_dealloc,
    .tp_repr = row_op_repr,
    .tp_traverse = row_op_traverse,
    .tp_clear = row_op_clear,
    .tp_vectorcall_offset = offsetof(RowOp, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A tilejit row op with its hot path in C (python/tilejit_fast.c).",
    .tp_methods = row_op_methods,
    .tp_dictoffset = offsetof(RowOp, dict),
};

/* row_op(slow, plans, fail, address, owner): a row op calling the C
 * function at address (kept alive by owner) on planned layouts, and slow on
 * everything else. */
static PyObject *make_row_op(PyObject *module, PyObject *args) {
  PyObject *slow, *plans, *fail, *address, *owner;
  (void)module;
  if (!PyArg_ParseTuple(args, "OO!OOO:row_op", &slow, &PyDict_Type, &plans, &fail, &address,
                        &owner))
    return NULL;
  RowOp *op = PyObject_GC_New(RowOp, &row_op_type);
  if (!op) return NULL;
  op->vectorcall = row_op_call;
  op->tensor = op->raw_stream = op->fn_owner = NULL;
  op->fn = NULL;
  op->dict = PyDict_New();
  op->slow = Py_NewRef(slow);
  op->plans = Py_NewRef(plans);
  op->fail = Py_NewRef(fail);
  PyObject_GC_Track((PyObject *)op);
  if (!op->dict || set_function(op, address, owner) < 0) {
    Py_DECREF(op);
    return NULL;
  }
  return (PyObject *)op;
}

static PyMethodDef module_methods[] = {
    {"row_op", make_row_op, METH_VARARGS, "row_op(slow, plans, fail, address, owner)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_tilejit_fast", "tilejit's row ops' hot path in C.", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__tilejit_fast(void); /* what Python's import calls */

PyMODINIT_FUNC PyInit__tilejit_fast(void) {
  static const struct {
    PyObject **slot;
    const char *text;
  } strings[] = {
      {&s_out, "out"},         {&s_num_warps, "num_warps"},   {&s_backend, "backend"},
      {&s_template, "template"}, {&s_stream, "stream"},       {&s_ptx, "ptx"},
      {&s_auto, "auto"},       {&s_dtype, "dtype"},           {&s_shape, "shape"},
      {&s_stride, "stride"},   {&s_get_device, "get_device"}, {&s_is_cuda, "is_cuda"},
      {&s_data_ptr, "data_ptr"},
  };
  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++)
    if (!*strings[i].slot && !(*strings[i].slot = PyUnicode_InternFromString(strings[i].text)))
      return NULL;
  if (!zero && !(zero = PyLong_FromLong(0))) return NULL;
  if (PyType_Ready(&row_op_type) < 0) return NULL;
  PyObject *m = PyModule_Create(&module_def);
  if (m && PyModule_AddIntConstant(m, "ABI", FAST_ABI) < 0) Py_CLEAR(m);
  return m;
}
