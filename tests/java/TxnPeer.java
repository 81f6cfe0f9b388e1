// The Java client's side of the transaction interop tests
// (tests/broker/transactions/java.rs), run as a single-file source program
// on the broker's classpath (`scripts/apache-pulsar classpath`).
//
//   TxnPeer produce URL TOPIC N   N messages "java-committed-i" in a committed
//                                 transaction, N "java-aborted-i" in an aborted
//                                 one, then a plain "end"; prints DONE.
//   TxnPeer consume URL TOPIC SUB acks in a transaction, from the earliest,
//                                 every message up to "end", printing
//                                 "GOT <payload>" for each before it; commits.

import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.transaction.Transaction;

public class TxnPeer {
    public static void main(String[] args) throws Exception {
        try (PulsarClient client = PulsarClient.builder()
                .serviceUrl(args[1])
                .enableTransaction(true)
                .build()) {
            switch (args[0]) {
                case "produce" -> produce(client, args[2], Integer.parseInt(args[3]));
                case "consume" -> consume(client, args[2], args[3]);
                default -> throw new IllegalArgumentException(args[0]);
            }
        }
        System.exit(0);
    }

    static Transaction begin(PulsarClient client) throws Exception {
        return client.newTransaction().withTransactionTimeout(60, TimeUnit.SECONDS).build().get();
    }

    static void produce(PulsarClient client, String topic, int n) throws Exception {
        try (Producer<byte[]> producer = client.newProducer()
                .topic(topic)
                .sendTimeout(0, TimeUnit.SECONDS)
                .create()) {
            Transaction committed = begin(client);
            for (int i = 0; i < n; i++) {
                producer.newMessage(committed).value(bytes("java-committed-" + i)).sendAsync();
            }
            producer.flush();
            committed.commit().get();
            Transaction aborted = begin(client);
            for (int i = 0; i < n; i++) {
                producer.newMessage(aborted).value(bytes("java-aborted-" + i)).sendAsync();
            }
            producer.flush();
            aborted.abort().get();
            producer.send(bytes("end"));
        }
        System.out.println("DONE");
    }

    static void consume(PulsarClient client, String topic, String subscription) throws Exception {
        try (Consumer<byte[]> consumer = client.newConsumer()
                .topic(topic)
                .subscriptionName(subscription)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .subscribe()) {
            Transaction txn = begin(client);
            while (true) {
                Message<byte[]> msg = consumer.receive();
                consumer.acknowledgeAsync(msg.getMessageId(), txn).get();
                String text = new String(msg.getValue(), StandardCharsets.UTF_8);
                if (text.equals("end")) {
                    break;
                }
                System.out.println("GOT " + text);
            }
            txn.commit().get();
        }
        System.out.println("DONE");
    }

    static byte[] bytes(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }
}
