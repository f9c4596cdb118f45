package com.swmansion.rnexecutorch

import android.os.Build
import com.facebook.react.bridge.ReactApplicationContext
import com.facebook.react.module.annotations.ReactModule
import com.facebook.react.turbomodule.core.interfaces.BindingsInstallerHolder
import com.facebook.react.turbomodule.core.interfaces.TurboModuleWithJSIBindings

/**
 * Installs `globalThis.__RNExecutorch` (the JSI binding of the C++ runner) when React Native
 * creates this module; everything else goes through JSI, not through this class.
 */
@ReactModule(name = RNExecutorchModule.NAME)
class RNExecutorchModule(context: ReactApplicationContext) :
  NativeRNExecutorchSpec(context), TurboModuleWithJSIBindings {

  override fun getName(): String = NAME

  // The bindings are installed before JS receives this module, so there is nothing left to do.
  override fun install(): Boolean = true

  override fun getBindingsInstaller(): BindingsInstallerHolder =
    createBindingsInstaller(isEmulator(), Build.VERSION.SDK_INT)

  companion object {
    const val NAME = "RNExecutorch"

    init {
      System.loadLibrary("react-native-executorch")
    }

    @JvmStatic
    private external fun createBindingsInstaller(isEmulator: Boolean, apiLevel: Int): BindingsInstallerHolder

    private fun isEmulator(): Boolean =
      Build.FINGERPRINT.startsWith("generic") ||
        Build.FINGERPRINT.contains("emulator") ||
        Build.HARDWARE.contains("ranchu") ||
        Build.HARDWARE.contains("goldfish") ||
        Build.PRODUCT.contains("sdk")
  }
}
