// sgl_meta._C: an empty module under the Python limited API (abi3). Importing
// it loads this shared library, whose static initializers register the
// operators with the PyTorch dispatcher; the ops are then reached through
// torch.ops.sgl_meta.*. No pybind11: nothing here ties the wheel to one Python
// or one torch version.
#include <Python.h>

PyMODINIT_FUNC PyInit__C(void) {
  static PyModuleDef module = {
      PyModuleDef_HEAD_INIT,
      "_C",
      "sgl_meta operator library (registers torch.ops.sgl_meta.*)",
      -1,
      nullptr,
  };
  return PyModule_Create(&module);
}
