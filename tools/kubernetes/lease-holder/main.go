// Command lease-holder takes part in leader election through client-go's own leaderelection
// package, with the lock and identity format a Go cloud-controller-manager uses. hcloud-ccm's
// tests run it beside hcloud-ccm to prove that the two hand a Lease over in both directions.
//
// It prints one line per event on standard output: "LEADER <identity>" when it sees a new
// leader, "LEADING" when it starts leading and "STOPPED" when it stops. SIGTERM or SIGINT
// cancels it; it then releases the Lease, as a controller manager with ReleaseOnCancel does.
//
// scripts/lease-holder.sh builds it in the module around it, with the client-go of the
// Kubernetes version the tests run on.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	namespace := flag.String("namespace", "kube-system", "namespace of the Lease")
	name := flag.String("name", "cloud-controller-manager", "name of the Lease")
	identity := flag.String("identity", "", "holder identity (default: <hostname>_<uuid>)")
	leaseDuration := flag.Duration("lease-duration", 15*time.Second, "lease duration")
	renewDeadline := flag.Duration("renew-deadline", 10*time.Second, "renew deadline")
	retryPeriod := flag.Duration("retry-period", 2*time.Second, "retry period")
	flag.Parse()

	id := *identity
	if id == "" {
		host, err := os.Hostname()
		if err != nil {
			fmt.Fprintln(os.Stderr, "hostname:", err)
			os.Exit(1)
		}
		id = host + "_" + string(uuid.NewUUID())
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(1)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: *namespace, Name: *name},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}

	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		cancel()
	}()

	fmt.Println("IDENTITY", id)
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   *leaseDuration,
		RenewDeadline:   *renewDeadline,
		RetryPeriod:     *retryPeriod,
		ReleaseOnCancel: true,
		Name:            *name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				fmt.Println("LEADING")
				<-ctx.Done()
			},
			OnStoppedLeading: func() {
				fmt.Println("STOPPED")
			},
			OnNewLeader: func(identity string) {
				fmt.Println("LEADER", identity)
			},
		},
	})
}
