// Intentionally empty: libexecutorch.so is made of ExecuTorch's static archives (CMakeLists.txt).
